//! Motion against a learned background, as `kernels/motion.cl` defines it: per whole tile
//! of 16 x 16 pixels, in the same integer arithmetic, but each tile's sum taken from luma
//! itself (the kernels take it from the left integral), the light over the still tiles
//! summed directly (the kernels subtract the last frame's moving tiles from the whole) and
//! each rectangle's moving pixels counted one pixel at a time (the kernels weigh each tile
//! by the pixels of it the rectangle covers).

use crate::pipeline::motion_tiles::{Tiles, DIFF_BINS, TILE};
use edgesight_frame::region::Region;

/// A gain of 1 (gains are in 1/65536).
pub const GAIN_ONE: u32 = 65536;

/// The background a camera has learned: each whole tile's mean in 1/65536 of a luma
/// level, and the last frame's mask (the next frame's light gain is taken over the tiles
/// it leaves still).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Background {
    /// Whole 16 x 16 tiles across the frame (the pixels past them are in no tile).
    pub tiles_x: usize,
    /// Whole 16 x 16 tiles down the frame.
    pub tiles_y: usize,
    /// Each tile's learned mean luma, in 1/65536 of a luma level, row by row.
    pub means: Vec<u32>,
    /// The last frame's moving tiles (1 moved, 0 still), row by row.
    pub mask: Vec<u8>,
}

impl Background {
    /// Nothing learned yet, for frames of `width` x `height`.
    pub fn new(width: usize, height: usize) -> Background {
        let (tiles_x, tiles_y) = (width / TILE, height / TILE);
        Background {
            tiles_x,
            tiles_y,
            means: vec![0; tiles_x * tiles_y],
            mask: vec![0; tiles_x * tiles_y],
        }
    }
}

/// The frame's light against the background's: `frame_sum / background_sum` in 1/65536,
/// between 1/8 and 8 (1 with no background).
pub fn light_gain(frame_sum: u32, background_sum: u32) -> u32 {
    if background_sum == 0 {
        return GAIN_ONE;
    }
    let g = (u64::from(frame_sum) << 16) / u64::from(background_sum);
    g.clamp(u64::from(GAIN_ONE / 8), u64::from(GAIN_ONE * 8)) as u32
}

/// Compares `luma` (dense, `width` x `height`) with `background`, tile by tile: a tile
/// moves where its mean lies more than `threshold` (1/256 of a luma level) outside the
/// range between the background's and the background's scaled by the light gain, widened
/// by as much again; then moves the background `rate` / 65536 of the way to this frame
/// where the tile moved, and `still_rate` / 65536 of the way where it did not. The gain is this frame's light over the background's on
/// the tiles that were still on the last frame.
pub fn tiles(
    luma: &[u8],
    width: usize,
    height: usize,
    background: &mut Background,
    rate: u32,
    still_rate: u32,
    threshold: u32,
) -> Tiles {
    let (tx, ty) = (background.tiles_x, background.tiles_y);
    assert_eq!((tx, ty), (width / TILE, height / TILE));
    let sums: Vec<u32> = (0..tx * ty)
        .map(|i| {
            let (t, b) = (i % tx, i / tx);
            (0..TILE)
                .flat_map(|r| (0..TILE).map(move |c| (TILE * b + r) * width + TILE * t + c))
                .map(|p| u32::from(luma[p]))
                .sum()
        })
        .collect();
    let still = |i: &usize| background.mask[*i] == 0;
    let frame_sum: u32 = (0..tx * ty).filter(still).map(|i| sums[i]).sum();
    let background_sum: u32 = (0..tx * ty)
        .filter(still)
        .map(|i| background.means[i] >> 8)
        .sum();
    let gain = light_gain(frame_sum, background_sum);
    let mut out = Tiles {
        mask: vec![0; tx * ty],
        diff_histogram: [0; DIFF_BINS],
        moving: 0,
        frame_sum,
        background_sum,
        gain,
    };
    for (i, &s) in sums.iter().enumerate() {
        let target = i64::from(s) << 8;
        let bg = background.means[i];
        let expected = ((u64::from(bg) * u64::from(gain)) >> 16) as i64;
        // The distance from the range between the background and the background in this
        // light, widened by the light's change: a clipped highlight follows no light, and
        // light changes unevenly.
        let change = (expected - i64::from(bg)).abs();
        let lo = expected.min(i64::from(bg)) - change;
        let hi = expected.max(i64::from(bg)) + change;
        let diff = if target < lo {
            (lo - target) as u64
        } else {
            (target - hi).max(0) as u64
        };
        if diff > u64::from(threshold) << 8 {
            out.mask[i] = 1;
            out.moving += 1;
        }
        out.diff_histogram[((diff >> 14) as usize).min(DIFF_BINS - 1)] += 1;
        // Something there becomes background slowly; a still tile follows fast, so that
        // light changing unevenly does not drift it past the threshold.
        let r = if out.mask[i] == 1 { rate } else { still_rate };
        let d = target - i64::from(bg);
        let step = ((d.unsigned_abs() * u64::from(r) + 32768) >> 16) as u32;
        background.means[i] = if d < 0 { bg - step } else { bg + step };
    }
    background.mask.clone_from(&out.mask);
    out
}

/// The moving pixels of `region`: a pixel moves where the tile it falls in moved, the last
/// column and row of tiles taking the pixels past the whole tiles.
pub fn moving_pixels(mask: &[u8], tiles_x: usize, tiles_y: usize, region: &Region) -> u64 {
    if tiles_x == 0 || tiles_y == 0 {
        return 0;
    }
    let mut n = 0;
    for y in region.y as usize..(region.y + region.height) as usize {
        for x in region.x as usize..(region.x + region.width) as usize {
            let (t, b) = ((x / TILE).min(tiles_x - 1), (y / TILE).min(tiles_y - 1));
            n += u64::from(mask[b * tiles_x + t]);
        }
    }
    n
}
