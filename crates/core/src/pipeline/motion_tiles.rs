//! What motion's kernels, their launcher and the reference share, in one place: the tile,
//! the bins of the tiles' differences (`kernels/motion.cl` is built with them as
//! `-DDIFF_BINS`, [`defines`]), the unit of rates, one frame's tile counts ([`Tiles`]) and
//! where those counts sit among the words the region sums write out. It knows no OpenCL,
//! so that `reference::motion` takes its types from here and the pipeline takes nothing
//! from the reference.

/// A tile's side in pixels (integral.cl's `TILE`, which motion.cl shares).
pub const TILE: usize = 16;
/// Bins of the tiles' differences from the background, a quarter luma level each, the
/// last holding the rest.
pub const DIFF_BINS: usize = 64;
/// The rate that sets the background to the frame (rates are in 1/65536).
pub const RATE_ONE: u32 = 65536;

/// u32 words of the counts the region sums write before the regions' moving pixels: the
/// histogram, the moving tiles, the frame's sum, the background's, the gain (motion.cl's
/// `MOTION_STATS`), each at its word below.
pub(super) const STATS_WORDS: usize = DIFF_BINS + 4;
pub(super) const STATS_MOVING: usize = DIFF_BINS;
/// (The frame's and the background's sums are read only by the checks against the
/// reference: `selftest` and the tests.)
pub(super) const STATS_FRAME_SUM: usize = DIFF_BINS + 1;
pub(super) const STATS_BACKGROUND_SUM: usize = DIFF_BINS + 2;
pub(super) const STATS_GAIN: usize = DIFF_BINS + 3;

/// The defines motion.cl takes from the host, so that the kernel counts into the bins
/// the host reads.
pub(super) fn defines() -> String {
    format!("-DDIFF_BINS={DIFF_BINS}")
}

/// What one frame's tiles give.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Tiles {
    /// 1 where the tile moved, row by row of tiles.
    pub mask: Vec<u8>,
    /// The tiles' differences from the (gained) background in quarter luma levels, the
    /// last bin holding the rest.
    pub diff_histogram: [u32; DIFF_BINS],
    /// Tiles that moved this frame (the ones set in `mask`).
    pub moving: u32,
    /// This frame's sum over the tiles the last frame left still, their background's
    /// (`mean >> 8` summed), and the gain between them (1/65536).
    pub frame_sum: u32,
    /// The background's sum over those same tiles (each tile's background `>> 8`).
    pub background_sum: u32,
    /// The light gain, `frame_sum * 65536 / background_sum` clamped to 1/8 to 8 times
    /// (65536: the light unchanged).
    pub gain: u32,
}
