//! What a frame costs in memory traffic: the bytes each stage must move (its inputs read
//! once, its outputs written once), the least any implementation of it could move, which
//! `bench` compares with a device copy of as many bytes and `process` reports per pixel.

use super::integral::Tiles;
use super::{FullImages, Stage};
use edgesight_frame::frame::FrameLayout;

/// Bytes a frame moves, per stage and in all.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Traffic {
    /// Each stage's, in [`Stage::ALL`] order (health on a frame that counts it).
    pub stages: [u64; Stage::ALL.len()],
    /// The pipeline's: the frame's luma plane read once and every image the pipeline keeps
    /// written once (no intermediate read counted).
    pub pipeline: u64,
}

/// A region's sums read, at each of four corners, at most one element of left, top and
/// corner (20 bytes each) and at most 15 x 15 pixels of luma and of the magnitude (the
/// part inside the corner's tile), besides its rectangle (16) and its sums (32): a bound,
/// reached by a region whose corners all lie at a tile's last pixel.
const REGION_BYTES: u64 = 16 + 4 * (3 * 20 + 2 * 15 * 15) + 32;

impl Traffic {
    /// The traffic of a pipeline for `layout` built with `images`, measuring `regions`
    /// regions (the whole frame counts as one).
    pub(crate) fn of(layout: &FrameLayout, images: FullImages, regions: usize) -> Traffic {
        let n = layout.pixels() as u64;
        let counts = 256 * 4;
        // The frame's first plane, which the luma stage reads (chroma planes never are).
        let frame = layout.format.row_bytes(layout.width) * u64::from(layout.height);
        let luma = if super::reads_luma_in_place(layout) {
            0
        } else {
            frame + n
        };
        let integrals = Tiles::new(layout).bytes(images);
        // dx and dy (2 bytes a pixel each) and the edge mask (1), and the mask.
        let (sobel_kept, mask) = match images {
            FullImages::Kept => (5 * n, n),
            FullImages::Discarded => (0, 0),
        };
        let binarize = if mask > 0 { n + 4 + mask } else { 0 };
        // Motion's tiles (a corner read, the background read and written and the mask
        // written and read again: 14 bytes a tile, 0.05 a pixel) are left out: it may be
        // switched off, and it runs inside the integral and region stages' launches.
        let stages = [
            luma,                          // luma: frame in, luma out
            n + n + sobel_kept,            // sobel: luma in; magnitude (dx, dy, edges) out
            n + counts,                    // histogram: luma in, counts out
            counts + 4 + counts,           // otsu: counts in; threshold, counts out
            binarize,                      // binarize: luma and threshold in, mask out
            2 * n + 4 + integrals,         // integral: luma, magnitude, threshold in
            REGION_BYTES * regions as u64, // regions
            n + counts,                    // health: magnitude in, counts out
        ];
        let written_luma = if luma > 0 { n } else { 0 };
        let pipeline = frame + written_luma + n + sobel_kept + mask + integrals;
        Traffic { stages, pipeline }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use edgesight_frame::frame::PixelFormat;

    #[test]
    fn bytes_for_1080p() {
        let (w, h) = (1920u64, 1080u64);
        let n = w * h;
        // Left: 120 whole tiles a row, top: 67 whole bands a column, corner: 120 x 67, 20
        // bytes each; local, a u16, a u32 and two u8 a pixel, only with the full images.
        let integrals = 20 * (120 * h + 67 * w + 120 * 67);
        let local = 8 * n;
        let grey = FrameLayout::packed(PixelFormat::Grey, w as u32, h as u32);
        let t = Traffic::of(&grey, FullImages::Discarded, 1);
        // The daemon's path: a grey frame is its own luma, Sobel writes the magnitude
        // only, binarize does not run.
        assert_eq!(t.stages[Stage::Luma as usize], 0);
        assert_eq!(t.stages[Stage::Sobel as usize], 2 * n);
        assert_eq!(t.stages[Stage::Binarize as usize], 0);
        assert_eq!(t.stages[Stage::Integral as usize], 2 * n + 4 + integrals);
        assert_eq!(t.pipeline, 2 * n + integrals);
        // About 4.6 bytes a pixel moved, where local made it 12.6 and the edge mask and the
        // four OpenCV-layout images 24.
        let per_pixel = t.pipeline as f64 / n as f64;
        assert!((4.5..4.6).contains(&per_pixel), "{per_pixel}");
        // process --raw of an RGB frame: luma converted and written, every full image.
        let rgb = FrameLayout::packed(PixelFormat::Rgb24, w as u32, h as u32);
        let t = Traffic::of(&rgb, FullImages::Kept, 3);
        assert_eq!(t.stages[Stage::Luma as usize], 4 * n);
        assert_eq!(t.stages[Stage::Sobel as usize], 7 * n);
        assert_eq!(t.stages[Stage::Binarize as usize], 2 * n + 4);
        assert_eq!(t.stages[Stage::Regions as usize], 3 * REGION_BYTES);
        assert_eq!(
            t.stages[Stage::Integral as usize],
            2 * n + 4 + integrals + local
        );
        assert_eq!(t.pipeline, 3 * n + n + n + 5 * n + n + integrals + local);
    }
}
