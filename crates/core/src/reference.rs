//! Plain-Rust references of every pipeline stage: the oracle the kernels are tested against.
//!
//! Written for clarity, one pixel at a time, straight from the definitions in docs/src/kernels.md
//! (which are OpenCV's where OpenCV defines the operation). Nothing here is fast, and
//! nothing here may share code with the kernels.

pub mod motion;

use crate::pipeline::{Border, Magnitude};
use edgesight_frame::frame::{rgb_to_luma, Cfa, FrameLayout, PixelFormat, Samples};
use edgesight_frame::region::{Region, RegionStats};

/// Otsu's threshold in OpenCV's doubles is defined once, in the pipeline, which runs it on
/// the host for the tunings that work the threshold out there; the kernels are tested
/// against that definition.
pub use crate::pipeline::otsu_threshold;

/// 8-bit luma of a frame, dense (`width` bytes per row).
pub fn luma(layout: &FrameLayout, src: &[u8]) -> Vec<u8> {
    let (w, h, stride) = (
        layout.width as usize,
        layout.height as usize,
        layout.stride as usize,
    );
    if let PixelFormat::Bayer(cfa, samples) = layout.format {
        let reduced: Vec<u8> = (0..h)
            .flat_map(|y| (0..w).map(move |x| sample8(&src[y * stride..], x, samples)))
            .collect();
        return bayer_to_luma(&reduced, w, h, cfa);
    }
    let mut out = Vec::with_capacity(w * h);
    for y in 0..h {
        let row = &src[y * stride..];
        for x in 0..w {
            let rgb = |r: usize, g: usize, b: usize| rgb_to_luma(row[r], row[g], row[b]);
            out.push(match layout.format {
                f if f.luma_plane_first() => row[x],
                PixelFormat::Yuyv => row[2 * x],
                PixelFormat::Uyvy => row[2 * x + 1],
                PixelFormat::Rgb24 => rgb(3 * x, 3 * x + 1, 3 * x + 2),
                PixelFormat::Bgr24 => rgb(3 * x + 2, 3 * x + 1, 3 * x),
                PixelFormat::Rgbx => rgb(4 * x, 4 * x + 1, 4 * x + 2),
                PixelFormat::Bgrx => rgb(4 * x + 2, 4 * x + 1, 4 * x),
                PixelFormat::Mono(samples) => sample8(row, x, samples),
                other => unreachable!("{other} has luma of its own"),
            });
        }
    }
    out
}

/// Sample `x` of a raw row, reduced to 8 bits: `min(255, (v + 2^(s-1)) >> s)` for a
/// sample `v` of `8 + s` bits (round half up, saturating).
pub fn sample8(row: &[u8], x: usize, samples: Samples) -> u8 {
    let word = |at: usize| u32::from(row[at]) | u32::from(row[at + 1]) << 8;
    let v = match samples {
        Samples::Eight => return row[x],
        Samples::Le10 | Samples::Le12 | Samples::Le16 => word(2 * x),
        Samples::Mipi10 => {
            let group = 5 * (x / 4);
            let low = u32::from(row[group + 4]) >> (2 * (x % 4)) & 0x3;
            u32::from(row[group + x % 4]) << 2 | low
        }
        Samples::Mipi12 => {
            let group = 3 * (x / 2);
            let low = u32::from(row[group + 2]) >> (4 * (x % 2)) & 0xF;
            u32::from(row[group + x % 2]) << 4 | low
        }
    };
    let shift = samples.shift();
    ((v + (1 << (shift - 1))) >> shift).min(255) as u8
}

/// OpenCV's 14-bit luma weights, as its Bayer to gray conversion uses them.
const BAYER_R2Y: u32 = 4899;
const BAYER_G2Y: u32 = 9617;
const BAYER_B2Y: u32 = 1868;

/// Luma of an 8-bit Bayer mosaic (dense, `w` x `h`) as OpenCV's
/// `cvtColor(src, COLOR_Bayer..2GRAY)` computes it, with V4L2's pattern name (RGGB is
/// OpenCV's `BayerBG`). Each pixel off the border weighs its own sample and the bilinear
/// estimates of the other two colours from its eight neighbours with OpenCV's weights, in
/// one fixed-point sum rounded half up. The border copies its neighbour inside: the first
/// and last columns of a row, then the first and last rows whole. A frame narrower or
/// shorter than 3 pixels is all 0, as OpenCV leaves it.
pub fn bayer_to_luma(mosaic: &[u8], w: usize, h: usize, cfa: Cfa) -> Vec<u8> {
    if w < 3 || h < 3 {
        return vec![0; w * h];
    }
    let (red_x, red_y) = cfa.red_at();
    let at = |x: usize, y: usize| u32::from(mosaic[y * w + x]);
    let inside = |x: usize, y: usize| -> u8 {
        let cross = at(x - 1, y) + at(x + 1, y) + at(x, y - 1) + at(x, y + 1);
        let diagonal = at(x - 1, y - 1) + at(x + 1, y - 1) + at(x - 1, y + 1) + at(x + 1, y + 1);
        let red_row = y as u32 % 2 == red_y;
        let red_column = x as u32 % 2 == red_x;
        // Weights summing to 65536 (4 x 16384): luma = (sum + 2^15) >> 16.
        let sum = match (red_row, red_column) {
            (true, true) => 4 * BAYER_R2Y * at(x, y) + BAYER_G2Y * cross + BAYER_B2Y * diagonal,
            (false, false) => 4 * BAYER_B2Y * at(x, y) + BAYER_G2Y * cross + BAYER_R2Y * diagonal,
            // Green: its row's other colour left and right, the third one above and below.
            (row_is_red, _) => {
                let (beside, above) = if row_is_red {
                    (BAYER_R2Y, BAYER_B2Y)
                } else {
                    (BAYER_B2Y, BAYER_R2Y)
                };
                let horizontal = at(x - 1, y) + at(x + 1, y);
                let vertical = at(x, y - 1) + at(x, y + 1);
                2 * (2 * BAYER_G2Y * at(x, y) + beside * horizontal + above * vertical)
            }
        };
        ((sum + (1 << 15)) >> 16) as u8
    };
    let mut out = Vec::with_capacity(w * h);
    for y in 0..h {
        for x in 0..w {
            out.push(inside(x.clamp(1, w - 2), y.clamp(1, h - 2)));
        }
    }
    out
}

/// Maps a coordinate at most one step outside `0..len` into it; `None` is the constant 0.
pub(crate) fn border_index(p: isize, len: usize, border: Border) -> Option<usize> {
    let len = len as isize;
    if (0..len).contains(&p) {
        return Some(p as usize);
    }
    let mapped = match border {
        Border::Constant => return None,
        Border::Replicate => p.clamp(0, len - 1),
        // gfedcb|abcdefgh|gfedcba; a single pixel reflects onto itself.
        Border::Reflect101 if len == 1 => 0,
        Border::Reflect101 if p < 0 => -p,
        Border::Reflect101 => 2 * len - 2 - p,
    };
    Some(mapped as usize)
}

/// Sobel 3x3 derivatives `(dx, dy)` of dense luma, as `cv2.Sobel(src, CV_16S, ...)`.
pub fn sobel(luma: &[u8], width: usize, height: usize, border: Border) -> (Vec<i16>, Vec<i16>) {
    let mut dx = Vec::with_capacity(width * height);
    let mut dy = Vec::with_capacity(width * height);
    sobel_each(luma, width, height, border, |gx, gy| {
        dx.push(gx);
        dy.push(gy);
    });
    (dx, dy)
}

/// [`magnitude`] of [`sobel`] without holding the derivatives (4 bytes a pixel): a live
/// frame's check needs only the magnitude.
pub fn sobel_magnitude(
    luma: &[u8],
    width: usize,
    height: usize,
    border: Border,
    kind: Magnitude,
) -> Vec<u8> {
    let mut out = Vec::with_capacity(width * height);
    sobel_each(luma, width, height, border, |gx, gy| {
        out.push(magnitude_of(gx, gy, kind))
    });
    out
}

/// Each pixel's Sobel derivatives, row by row.
fn sobel_each(
    luma: &[u8],
    width: usize,
    height: usize,
    border: Border,
    mut each: impl FnMut(i16, i16),
) {
    const KX: [[i32; 3]; 3] = [[-1, 0, 1], [-2, 0, 2], [-1, 0, 1]];
    const KY: [[i32; 3]; 3] = [[-1, -2, -1], [0, 0, 0], [1, 2, 1]];
    let at = |x: isize, y: isize| -> i32 {
        match (
            border_index(x, width, border),
            border_index(y, height, border),
        ) {
            (Some(x), Some(y)) => i32::from(luma[y * width + x]),
            _ => 0,
        }
    };
    for y in 0..height as isize {
        for x in 0..width as isize {
            let (mut gx, mut gy) = (0, 0);
            for j in 0..3 {
                for i in 0..3 {
                    let v = at(x + i as isize - 1, y + j as isize - 1);
                    gx += KX[j][i] * v;
                    gy += KY[j][i] * v;
                }
            }
            each(gx as i16, gy as i16);
        }
    }
}

/// Gradient magnitude, saturated to 8 bits: L1 `|dx| + |dy|`, or L2 `sqrt(dx² + dy²)`
/// rounded to the nearest integer.
pub fn magnitude(dx: &[i16], dy: &[i16], kind: Magnitude) -> Vec<u8> {
    dx.iter()
        .zip(dy)
        .map(|(&gx, &gy)| magnitude_of(gx, gy, kind))
        .collect()
}

fn magnitude_of(gx: i16, gy: i16, kind: Magnitude) -> u8 {
    let (gx, gy) = (i64::from(gx), i64::from(gy));
    let m = match kind {
        Magnitude::L1 => gx.abs() + gy.abs(),
        Magnitude::L2 => {
            // The root of an integer is never exactly k + 1/2, so this rounding has no
            // ties; f64 is exact enough for sums below 2^21.
            ((gx * gx + gy * gy) as f64).sqrt().round() as i64
        }
    };
    m.min(255) as u8
}

/// 255 where `magnitude >= threshold`, else 0.
pub fn edge_mask(magnitude: &[u8], threshold: u8) -> Vec<u8> {
    magnitude
        .iter()
        .map(|&m| if m >= threshold { 255 } else { 0 })
        .collect()
}

/// 256-bin histogram, as `cv2.calcHist([img], [0], None, [256], [0, 256])`.
pub fn histogram(luma: &[u8]) -> [u32; 256] {
    let mut hist = [0u32; 256];
    for &v in luma {
        hist[usize::from(v)] += 1;
    }
    hist
}

/// 255 where `luma > threshold`, else 0 (`THRESH_BINARY` with maxval 255).
pub fn binarize(luma: &[u8], threshold: u8) -> Vec<u8> {
    luma.iter()
        .map(|&v| if v > threshold { 255 } else { 0 })
        .collect()
}

/// Integral sum and squared sum in OpenCV's `(height + 1) x (width + 1)` layout.
pub fn integral(luma: &[u8], width: usize, height: usize) -> (Vec<u32>, Vec<u64>) {
    let stride = width + 1;
    let mut sum = vec![0u32; stride * (height + 1)];
    let mut sqsum = vec![0u64; stride * (height + 1)];
    for y in 0..height {
        for x in 0..width {
            let v = u64::from(luma[y * width + x]);
            let (above, left, corner) =
                ((y) * stride + x + 1, (y + 1) * stride + x, y * stride + x);
            let here = (y + 1) * stride + x + 1;
            sum[here] =
                (u64::from(sum[above]) + u64::from(sum[left]) - u64::from(sum[corner]) + v) as u32;
            sqsum[here] = sqsum[above] + sqsum[left] - sqsum[corner] + v * v;
        }
    }
    (sum, sqsum)
}

/// Integral of `mask != 0`, same layout as [`integral`].
pub fn integral_count(mask: &[u8], width: usize, height: usize) -> Vec<u32> {
    let ones: Vec<u8> = mask.iter().map(|&m| u8::from(m != 0)).collect();
    integral(&ones, width, height).0
}

/// The per-pixel planes a region's sums are taken over: luma, and the edge and
/// foreground masks (non-zero counts), all `width` columns wide.
pub struct Planes<'a> {
    /// Dense 8-bit luma, `width` bytes a row.
    pub luma: &'a [u8],
    /// The edge mask, non-zero where a pixel is an edge; same layout.
    pub edges: &'a [u8],
    /// The foreground mask, non-zero where luma is above Otsu's threshold; same layout.
    pub foreground: &'a [u8],
    /// Pixels in a row of each plane.
    pub width: usize,
}

/// A region's sums, pixel by pixel: its area, the sum of luma and of its squares, and its
/// edge and foreground pixels.
pub fn region_sums(planes: &Planes, region: &Region) -> RegionStats {
    let mut stats = RegionStats {
        area: u64::from(region.width) * u64::from(region.height),
        ..RegionStats::default()
    };
    for y in region.y as usize..(region.y + region.height) as usize {
        for x in region.x as usize..(region.x + region.width) as usize {
            let i = y * planes.width + x;
            let v = u64::from(planes.luma[i]);
            stats.sum += v;
            stats.sqsum += v * v;
            stats.edges += u64::from(planes.edges[i] != 0);
            stats.foreground += u64::from(planes.foreground[i] != 0);
        }
    }
    stats
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reflect101_and_friends() {
        assert_eq!(border_index(-1, 5, Border::Reflect101), Some(1));
        assert_eq!(border_index(5, 5, Border::Reflect101), Some(3));
        assert_eq!(border_index(-1, 1, Border::Reflect101), Some(0));
        assert_eq!(border_index(1, 1, Border::Reflect101), Some(0));
        assert_eq!(border_index(-1, 5, Border::Replicate), Some(0));
        assert_eq!(border_index(5, 5, Border::Replicate), Some(4));
        assert_eq!(border_index(-1, 5, Border::Constant), None);
        assert_eq!(border_index(2, 5, Border::Constant), Some(2));
    }

    #[test]
    fn sobel_of_a_step() {
        // A vertical step 0 | 100 in a 4x3 image: dx = 4 * 100 on the two columns beside it.
        let img = [0, 0, 100, 100, 0, 0, 100, 100, 0, 0, 100, 100];
        let (dx, dy) = sobel(&img, 4, 3, Border::Replicate);
        assert_eq!(dx, [0, 400, 400, 0, 0, 400, 400, 0, 0, 400, 400, 0]);
        assert!(dy.iter().all(|&v| v == 0));
        let (dx, _) = sobel(&img, 4, 3, Border::Constant);
        assert_eq!(&dx[..4], &[0, 300, 300, -300]);
        let (dx, _) = sobel(&img, 4, 3, Border::Reflect101);
        assert_eq!(&dx[..4], &[0, 400, 400, 0]);
    }

    /// The fused magnitude is the magnitude of the derivatives, pixel for pixel, on
    /// noise with every border and both norms (saturation included).
    #[test]
    fn sobel_magnitude_is_the_magnitude_of_sobel() {
        let (w, h) = (37, 23);
        let mut state = 0x2545_f491_u32;
        let img: Vec<u8> = (0..w * h)
            .map(|_| {
                state ^= state << 13;
                state ^= state >> 17;
                state ^= state << 5;
                state as u8
            })
            .collect();
        for border in [Border::Replicate, Border::Constant, Border::Reflect101] {
            let (dx, dy) = sobel(&img, w, h, border);
            for kind in [Magnitude::L1, Magnitude::L2] {
                let want = magnitude(&dx, &dy, kind);
                assert!(want.contains(&255) && want.iter().any(|&m| m < 255));
                assert_eq!(sobel_magnitude(&img, w, h, border, kind), want);
            }
        }
    }

    #[test]
    fn magnitudes() {
        let m = magnitude(&[3, -1020, 0, 200], &[4, 1020, 0, 60], Magnitude::L2);
        assert_eq!(m, [5, 255, 0, 209]); // sqrt(43600) = 208.8
        let m = magnitude(&[3, -100, 0, 200], &[-4, 100, 0, 60], Magnitude::L1);
        assert_eq!(m, [7, 200, 0, 255]);
        assert_eq!(edge_mask(&[9, 10, 11], 10), [0, 255, 255]);
    }

    fn hist_of(levels: &[(u8, u32)]) -> [u32; 256] {
        let mut h = [0; 256];
        for &(v, n) in levels {
            h[usize::from(v)] += n;
        }
        h
    }

    #[test]
    fn otsu_ties_keep_the_first_maximum() {
        // Three equal levels: splitting after 10 or after 128 scores the same.
        assert_eq!(otsu_threshold(&hist_of(&[(10, 5), (128, 5), (246, 5)])), 10);
        assert_eq!(otsu_threshold(&hist_of(&[(40, 7), (200, 9)])), 40);
        assert_eq!(otsu_threshold(&hist_of(&[(77, 100)])), 0);
        assert_eq!(otsu_threshold(&hist_of(&[(255, 1)])), 0);
    }

    #[test]
    fn integral_layout() {
        let img = [1, 2, 3, 4, 5, 6];
        let (s, q) = integral(&img, 3, 2);
        assert_eq!(s, [0, 0, 0, 0, 0, 1, 3, 6, 0, 5, 12, 21]);
        assert_eq!(q, [0, 0, 0, 0, 0, 1, 5, 14, 0, 17, 46, 91]);
        assert_eq!(integral_count(&[0, 255, 0, 9, 0, 0], 3, 2)[11], 2);
    }
}
