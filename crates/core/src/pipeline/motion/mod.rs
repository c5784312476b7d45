//! Motion stage: `motion_tiles` from `kernels/motion.cl`, run in the integral stage's last
//! launch ([`TileParams`]): each whole 16 x 16 tile's mean (from the left integral)
//! against a background learned on the device, in the light of the tiles that stayed
//! still, and the tiles that moved; the region stage's launch then counts every region's
//! moving pixels from that mask and copies the frame's counts out ([`MotionParams`]). No
//! launch of its own: on an NVIDIA H100 one costs about a tenth of the pipeline. What
//! the kernel is given each frame (how fast the background follows, the threshold, when
//! to learn afresh) is decided on the host by [`control`], from what the last frame's
//! counts said.

pub(super) mod control;

use opencl3::memory::Buffer;

use super::buffers::held_bytes;
use super::motion_tiles::{DIFF_BINS, TILE};
use super::DeviceImage;
use crate::cl::{write_blocking, ClError, Gpu};
use crate::kernel_params;
use edgesight_frame::frame::FrameLayout;

kernel_params! {
    /// What integral.cl's last launch takes for motion.cl's `motion_tiles`, after its own
    /// parameters (`MOTION_PARAMS`): with `motion` 0 it runs none. With motion, its
    /// work-items read light[0..6] (6 words), at most light[2 + parity] <= tiles entries of
    /// moved's half `parity` (the last frame's listing, or none: light zeroed) and, for
    /// each tile listed there and each tile of their own (of tiles_x x tiles_y = width /
    /// 16 x height / 16), the rows 16 b + 15 of left's sum plane in the tile's column and
    /// the one before, and those rows in the last whole tile column; they read and write
    /// background and mask at their tiles (tiles entries each), add into light and
    /// acc[0..=64] (65 words) and write at most tiles entries of moved's other half (2 x
    /// tiles entries), each moving tile one. [`MotionStage`] makes every buffer so for its
    /// layout, and the pipeline builds it and the integral stage for the same one.
    #[derive(Clone, Copy)]
    pub(super) struct TileParams<'a> {
        motion: u32,
        mask: &'a Buffer<u8>,
        background: &'a Buffer<u32>,
        light: &'a Buffer<u32>,
        moved: &'a Buffer<u32>,
        parity: u32,
        rate: u32,
        still_rate: u32,
        threshold: u32,
        acc: &'a Buffer<u32>,
    }
}

impl TileParams<'_> {
    /// Whether the launch runs motion_tiles.
    pub(super) fn on(&self) -> bool {
        self.motion != 0
    }
}

kernel_params! {
    /// What regions.cl's `region_sums` takes of motion, after its own parameters: the
    /// frame's mask and counts, which it reads where `motion` is 1.
    pub(super) struct MotionParams<'a> {
        mask: &'a Buffer<u8>,
        motion: u32,
        acc: &'a Buffer<u32>,
        light: &'a Buffer<u32>,
        parity: u32,
        moving_out: &'a Buffer<u32>,
    }
}

/// What one frame's kernels are told.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FrameMotion {
    /// How far the background moves to this frame, in 1/65536 (65536: learn it afresh),
    /// where a tile moved (something is there).
    pub rate: u32,
    /// The same where a tile is still.
    pub still_rate: u32,
    /// A tile moves past this difference from the background, in 1/256 of a luma level.
    pub threshold: u32,
}

pub(super) struct MotionStage {
    tiles_x: u32,
    tiles_y: u32,
    background: DeviceImage<u32>,
    mask: DeviceImage<u8>,
    /// The still tiles' background sums for the frames of parity 0 and 1, how many tiles
    /// `moved` lists for each, and this frame's sum over the still tiles (motion.cl's
    /// LIGHT_* words).
    light: DeviceImage<u32>,
    /// The tiles that moved, listed for the frames of parity 0 and 1 (`tiles` entries
    /// each).
    moved: DeviceImage<u32>,
    /// The histogram and the moving tiles, summed by `motion_tiles`' groups.
    acc: DeviceImage<u32>,
    /// This frame's parity: which half of `light` and `moved` it reads (the other it fills
    /// for the next frame).
    parity: u32,
    /// Whether `acc` and `light` hold what a finished frame left them (zeros where the
    /// next frame sums); a frame that failed before its region sums ran does not.
    clean: bool,
}

/// Words of `light`.
const LIGHT_WORDS: usize = 6;

/// A device buffer of `len` zeros (and a guard band).
fn zeroed<T: super::buffers::Sentinel>(gpu: &Gpu, len: usize) -> Result<DeviceImage<T>, ClError> {
    let mut image = DeviceImage::new(gpu, len)?;
    write_blocking(gpu, &mut image.buf, 0, &vec![T::default(); len])?;
    Ok(image)
}

impl MotionStage {
    pub(super) fn new(gpu: &Gpu, layout: &FrameLayout) -> Result<MotionStage, ClError> {
        let tile = TILE as u32;
        let (tiles_x, tiles_y) = (layout.width / tile, layout.height / tile);
        let tiles = (tiles_x * tiles_y) as usize;
        // Zeros, so that the first frame compares with a defined background and takes
        // every tile as still.
        Ok(MotionStage {
            tiles_x,
            tiles_y,
            background: zeroed(gpu, tiles)?,
            mask: zeroed(gpu, tiles)?,
            light: DeviceImage::new(gpu, LIGHT_WORDS)?,
            moved: DeviceImage::new(gpu, 2 * tiles)?,
            acc: DeviceImage::new(gpu, DIFF_BINS + 1)?,
            parity: 0,
            clean: false,
        })
    }

    /// Whole tiles: a frame of none (narrower or shorter than 16 pixels) has no motion.
    pub(super) fn tiles(&self) -> u32 {
        self.tiles_x * self.tiles_y
    }

    /// What the integral stage's last launch is told of this frame's motion: `frame`'s,
    /// run behind its corner sums, or none (where `frame` is `None` or the frame has no
    /// whole tile). `frame.rate` and `frame.still_rate` must be 65536 on the first frame
    /// and after a failed one (the background is unset then). The region sums that follow read the mask and copy
    /// the counts out, with [`MotionStage::region_params`].
    pub(super) fn tile_params(
        &mut self,
        gpu: &Gpu,
        frame: Option<FrameMotion>,
    ) -> Result<TileParams<'_>, ClError> {
        let frame = frame.filter(|_| self.tiles() > 0);
        if frame.is_some() {
            if !self.clean {
                write_blocking(gpu, &mut self.acc.buf, 0, &[0; DIFF_BINS + 1])?;
                write_blocking(gpu, &mut self.light.buf, 0, &[0; LIGHT_WORDS])?;
            }
            // Until the region sums have run, acc holds this frame's counts.
            self.clean = false;
        }
        let told = frame.unwrap_or(FrameMotion {
            rate: 0,
            still_rate: 0,
            threshold: 0,
        });
        Ok(TileParams {
            motion: u32::from(frame.is_some()),
            mask: &self.mask.buf,
            background: &self.background.buf,
            light: &self.light.buf,
            moved: &self.moved.buf,
            parity: self.parity,
            rate: told.rate,
            still_rate: told.still_rate,
            threshold: told.threshold,
            acc: &self.acc.buf,
        })
    }

    /// What the region sums take of this frame's motion, writing the counts and the
    /// moving pixels to `out` where `on` (the frame's [`MotionStage::tile_params`] ran
    /// motion).
    pub(super) fn region_params<'a>(&'a self, on: bool, out: &'a Buffer<u32>) -> MotionParams<'a> {
        MotionParams {
            mask: &self.mask.buf,
            motion: u32::from(on),
            acc: &self.acc.buf,
            light: &self.light.buf,
            parity: self.parity,
            moving_out: out,
        }
    }

    /// After a frame's region sums have run: the counts are zeroed again, and the next
    /// frame reads what this one listed.
    pub(super) fn finished(&mut self) {
        self.clean = true;
        self.parity ^= 1;
    }

    /// The background (1/65536 luma) and the last frame's mask, tile by tile, into the
    /// memory `background` and `mask` have once they are large enough.
    pub(super) fn read_state_into(
        &self,
        gpu: &Gpu,
        background: &mut Vec<u32>,
        mask: &mut Vec<u8>,
    ) -> Result<(), ClError> {
        self.background.read_into(gpu, background)?;
        self.mask.read_into(gpu, mask)
    }

    /// The last frame's mask, tile by tile, with the tiles across and down.
    pub(super) fn read_mask(&self, gpu: &Gpu) -> Result<(Vec<u8>, u32, u32), ClError> {
        Ok((self.mask.read(gpu)?, self.tiles_x, self.tiles_y))
    }

    pub(super) fn guard_checks(&self, gpu: &Gpu) -> Result<[(&'static str, bool); 5], ClError> {
        Ok([
            ("motion_background", self.background.guard_intact(gpu)?),
            ("motion_mask", self.mask.guard_intact(gpu)?),
            ("motion_moved", self.moved.guard_intact(gpu)?),
            ("motion_light", self.light.guard_intact(gpu)?),
            ("motion_counts", self.acc.guard_intact(gpu)?),
        ])
    }

    pub(super) fn held_bytes(&self) -> Result<u64, ClError> {
        Ok(held_bytes(&self.background.buf)?
            + held_bytes(&self.light.buf)?
            + held_bytes(&self.acc.buf)?
            + held_bytes(&self.mask.buf)?
            + held_bytes(&self.moved.buf)?)
    }
}
