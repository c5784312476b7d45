//! Motion stage: `motion_tiles` and `motion_sums` from `kernels/motion.cl`, after the
//! integral and region stages: each whole 16 x 16 tile's mean (from the corner integral)
//! against a background learned on the device, the tiles that moved, and every region's
//! moving pixels in O(1) from the integral of that mask. What the kernels are given each
//! frame (how fast the background follows, the threshold, when to learn afresh) is
//! decided on the host by [`control`], from what the last frame's counts said.

pub(super) mod control;

use opencl3::event::Event;
use opencl3::kernel::Kernel;
use opencl3::memory::Buffer;

use super::buffers::held_bytes;
use super::{device_buffer, DeviceImage, Launch};
use crate::cl::{launch, write_blocking, CallContext, ClError, Gpu, Record, MOTION_CL};
use crate::frame::FrameLayout;
use crate::kernel_params;

/// Quarter-level bins of the tiles' differences (`DIFF_BINS` in motion.cl).
pub(super) const DIFF_BINS: usize = 64;
/// u32 words of the counts `motion_sums` writes before the regions' moving pixels: the
/// histogram, the moving tiles, the frame's sum, the background's, the gain
/// (`MOTION_STATS`), each at its word below.
pub(super) const STATS_WORDS: usize = 68;
pub(super) const STATS_MOVING: usize = DIFF_BINS;
/// (The frame's and the background's sums are read only by the tests.)
#[cfg(test)]
pub(super) const STATS_FRAME_SUM: usize = DIFF_BINS + 1;
#[cfg(test)]
pub(super) const STATS_BACKGROUND_SUM: usize = DIFF_BINS + 2;
pub(super) const STATS_GAIN: usize = DIFF_BINS + 3;
/// A tile's side.
const TILE: u32 = 16;
/// The rate that sets the background to the frame: rates are in 1/65536.
pub(super) const RATE_ONE: u32 = 65536;
/// Work-items of `motion_tiles`' groups, and of `motion_sums`' one group.
const GROUP_SIZE: usize = 64;
const SUMS_GROUP_SIZE: usize = 256;

kernel_params! {
    /// motion.cl's `motion_light`.
    struct LightParams<'a> {
        corner: &'a Buffer<u32>,
        tiles_x: u32,
        tiles_y: u32,
        background: &'a Buffer<u32>,
        mask: &'a Buffer<u8>,
        totals: &'a Buffer<u32>,
    }
}

kernel_params! {
    /// motion.cl's `motion_tiles`.
    struct TilesParams<'a> {
        corner: &'a Buffer<u32>,
        tiles_x: u32,
        tiles_y: u32,
        background: &'a Buffer<u32>,
        totals: &'a Buffer<u32>,
        rate: u32,
        threshold: u32,
        mask: &'a Buffer<u8>,
        acc: &'a Buffer<u32>,
    }
}

kernel_params! {
    /// motion.cl's `motion_sums`.
    struct SumsParams<'a> {
        mask: &'a Buffer<u8>,
        tiles_x: u32,
        tiles_y: u32,
        totals: &'a Buffer<u32>,
        acc: &'a Buffer<u32>,
        grid: &'a Buffer<u32>,
        rects: &'a Buffer<u32>,
        count: u32,
        out: &'a Buffer<u32>,
    }
}

/// What one frame's kernels are told.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct FrameMotion {
    /// How far the background moves to this frame, in 1/65536 (65536: learn it afresh).
    pub rate: u32,
    /// A tile moves past this difference from the background, in 1/256 of a luma level.
    pub threshold: u32,
}

pub(super) struct MotionStage {
    light_kernel: Kernel,
    tiles_kernel: Kernel,
    tiles_launch: Launch,
    sums_kernel: Kernel,
    sums_local: usize,
    tiles_x: u32,
    tiles_y: u32,
    background: DeviceImage<u32>,
    /// The sums of the still tiles (those the last frame's mask leaves), of this frame and
    /// of the background: the light gain.
    totals: Buffer<u32>,
    /// The histogram and the moving tiles, summed by `motion_tiles`' groups.
    acc: Buffer<u32>,
    mask: DeviceImage<u8>,
    grid: DeviceImage<u32>,
    /// Whether `acc` and `totals` hold zeros, as every frame's `motion_sums` leaves them; a
    /// frame that failed before its `motion_sums` ran does not.
    clean: bool,
}

/// A device buffer of `len` zeros (and a guard band).
fn zeroed<T: super::buffers::Sentinel>(gpu: &Gpu, len: usize) -> Result<DeviceImage<T>, ClError> {
    let mut image = DeviceImage::new(gpu, len)?;
    write_blocking(gpu, &mut image.buf, 0, &vec![T::default(); len])?;
    Ok(image)
}

impl MotionStage {
    pub(super) fn new(gpu: &Gpu, layout: &FrameLayout) -> Result<MotionStage, ClError> {
        let program = gpu.build(MOTION_CL)?;
        let light_kernel = Kernel::create(&program, "motion_light").call("clCreateKernel")?;
        let tiles_kernel = Kernel::create(&program, "motion_tiles").call("clCreateKernel")?;
        let sums_kernel = Kernel::create(&program, "motion_sums").call("clCreateKernel")?;
        // One geometry for both per-tile kernels: the smaller of what each allows.
        let tiles_launch = Launch::one_d(gpu, &tiles_kernel, GROUP_SIZE)?;
        let tiles_launch = Launch::one_d(gpu, &light_kernel, tiles_launch.local[0])?;
        let sums_local = Launch::one_d(gpu, &sums_kernel, SUMS_GROUP_SIZE)?.local[0];
        let (tiles_x, tiles_y) = (layout.width / TILE, layout.height / TILE);
        let tiles = (tiles_x * tiles_y) as usize;
        let grid = (tiles_x as usize + 1) * (tiles_y as usize + 1);
        // Zeros, so that the first frame compares with a defined background and takes
        // every tile as still.
        let background = zeroed(gpu, tiles)?;
        let mask = zeroed(gpu, tiles)?;
        Ok(MotionStage {
            light_kernel,
            tiles_kernel,
            tiles_launch,
            sums_kernel,
            sums_local,
            tiles_x,
            tiles_y,
            background,
            totals: device_buffer(gpu, 2)?,
            acc: device_buffer(gpu, DIFF_BINS + 1)?,
            mask,
            grid: DeviceImage::new(gpu, grid)?,
            clean: false,
        })
    }

    /// Whole tiles: a frame of none (narrower or shorter than 16 pixels) has no motion.
    pub(super) fn tiles(&self) -> u32 {
        self.tiles_x * self.tiles_y
    }

    /// Enqueues the frame's two kernels behind the integrals (`corner`) and the region
    /// rectangles (`rects`, `count` of them), writing the counts and the regions' moving
    /// pixels to `out`; nothing where the frame has no whole tile. `frame.rate` must be
    /// 65536 on the first frame and after a failed one (the background is unset then).
    #[allow(clippy::too_many_arguments)]
    pub(super) fn enqueue(
        &mut self,
        gpu: &Gpu,
        frame: FrameMotion,
        corner: &Buffer<u32>,
        rects: &Buffer<u32>,
        count: usize,
        out: &Buffer<u32>,
        record: Record,
        mut event: impl FnMut(Option<Event>),
    ) -> Result<(), ClError> {
        if self.tiles() == 0 {
            return Ok(());
        }
        if !self.clean {
            write_blocking(gpu, &mut self.acc, 0, &[0; DIFF_BINS + 1])?;
            write_blocking(gpu, &mut self.totals, 0, &[0; 2])?;
            self.clean = true;
        }
        // Until motion_sums has run, acc holds this frame's counts.
        self.clean = false;
        let tiles = self.tiles() as usize;
        let global = [self.tiles_launch.global_1d(tiles)];
        let local = [self.tiles_launch.local[0]];
        let params = LightParams {
            corner,
            tiles_x: self.tiles_x,
            tiles_y: self.tiles_y,
            background: &self.background.buf,
            mask: &self.mask.buf,
            totals: &self.totals,
        };
        // SAFETY: `LightParams` is the kernel's parameter list. Work-item i < tiles_x *
        // tiles_y (the others only take part in their group's barriers) reads corner
        // entries i, i - 1, i - tiles_x and i - tiles_x - 1 (those that exist) of the
        // integral stage's corner plane of whole tiles (tiles_x x tiles_y of this layout,
        // the pipeline's only caller passing its own), background[i] and mask[i] (tiles
        // entries each, made here), and adds into totals[0..2] (made here).
        event(unsafe {
            launch(
                gpu,
                &self.light_kernel,
                &params,
                &global,
                &local,
                "clEnqueueNDRangeKernel(motion_light)",
                record,
            )
        }?);
        let params = TilesParams {
            corner,
            tiles_x: self.tiles_x,
            tiles_y: self.tiles_y,
            background: &self.background.buf,
            totals: &self.totals,
            rate: frame.rate,
            threshold: frame.threshold,
            mask: &self.mask.buf,
            acc: &self.acc,
        };
        // SAFETY: as motion_light's above, with totals[0..2] read, background[i] and
        // mask[i] written, and acc[0..=64] (65 words, made here) added into.
        event(unsafe {
            launch(
                gpu,
                &self.tiles_kernel,
                &params,
                &global,
                &local,
                "clEnqueueNDRangeKernel(motion_tiles)",
                record,
            )
        }?);
        let params = SumsParams {
            mask: &self.mask.buf,
            tiles_x: self.tiles_x,
            tiles_y: self.tiles_y,
            totals: &self.totals,
            acc: &self.acc,
            grid: &self.grid.buf,
            rects,
            count: count as u32,
            out,
        };
        // SAFETY: `SumsParams` is the kernel's parameter list, launched as exactly one
        // group. It reads the mask's tiles entries, totals[0..2], acc[0..=64],
        // writes the (tiles_x + 1) x (tiles_y + 1) entries of grid (made here) and reads
        // them back at the corners of each of the `count` rectangles of `rects` (4 words
        // each, inside the frame: the region stage's, which the pipeline passes with their
        // count), and writes 68 + 2 x `count` words of `out` (the readout's motion part,
        // sized for the same regions).
        event(unsafe {
            launch(
                gpu,
                &self.sums_kernel,
                &params,
                &[self.sums_local],
                &[self.sums_local],
                "clEnqueueNDRangeKernel(motion_sums)",
                record,
            )
        }?);
        Ok(())
    }

    /// Marks the kernels' sums as zeroed again: after `motion_sums` has run.
    pub(super) fn finished(&mut self) {
        self.clean = true;
    }

    /// The background (1/65536 luma) and the last frame's mask, tile by tile.
    #[cfg(test)]
    pub(super) fn read_state(&self, gpu: &Gpu) -> Result<(Vec<u32>, Vec<u8>), ClError> {
        Ok((self.background.read(gpu)?, self.mask.read(gpu)?))
    }

    /// The last frame's mask, tile by tile, with the tiles across and down.
    pub(super) fn read_mask(&self, gpu: &Gpu) -> Result<(Vec<u8>, u32, u32), ClError> {
        Ok((self.mask.read(gpu)?, self.tiles_x, self.tiles_y))
    }

    pub(super) fn guard_checks(&self, gpu: &Gpu) -> Result<[(&'static str, bool); 3], ClError> {
        Ok([
            ("motion_background", self.background.guard_intact(gpu)?),
            ("motion_mask", self.mask.guard_intact(gpu)?),
            ("motion_grid", self.grid.guard_intact(gpu)?),
        ])
    }

    pub(super) fn held_bytes(&self) -> Result<u64, ClError> {
        Ok(held_bytes(&self.background.buf)?
            + held_bytes(&self.totals)?
            + held_bytes(&self.acc)?
            + held_bytes(&self.mask.buf)?
            + held_bytes(&self.grid.buf)?)
    }
}
