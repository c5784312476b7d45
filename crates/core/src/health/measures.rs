//! What the detectors read from one frame's results: exposure and histogram shape from the
//! luma histogram, the mean gradient from the gradient histogram, each grid cell's mean and
//! contrast from its sums, and a fingerprint of the whole picture. All O(cells + 256).

use std::hash::{Hash, Hasher};

use crate::pipeline::FrameResult;

/// Luma at or below this is clipped at the dark end.
pub const DARK_LEVEL: usize = 8;
/// Luma at or above this is clipped at the bright end.
pub const BRIGHT_LEVEL: usize = 247;
/// Width of the grey-level window a covered view's pixels crowd into.
pub const BAND_LEVELS: usize = 32;

/// One frame's numbers; the cell vectors are reused from frame to frame.
#[derive(Clone, Debug, Default)]
pub struct Measures {
    /// Mean luma of the frame, 0 to 255.
    pub mean: f64,
    /// Shares of the pixels clipped at each end.
    pub dark: f64,
    /// Share of the pixels clipped at the bright end (luma >= 247), 0 to 1.
    pub bright: f64,
    /// The largest share of the pixels within [`BAND_LEVELS`] consecutive grey levels.
    pub band: f64,
    /// The luma levels below which a tenth and nine tenths of the pixels lie: the
    /// picture's dark and bright parts, which a light change moves with the mean and a
    /// dark object or a glare spot does not.
    pub p10: f64,
    /// The lowest luma level at or below which nine tenths of the pixels lie (the bright parts).
    pub p90: f64,
    /// Mean gradient magnitude, on the frames whose gradient histogram was counted.
    pub gradient: Option<f64>,
    /// Mean luma of each cell of the health grid, row by row.
    pub cell_means: Vec<f64>,
    /// Luma standard deviation (contrast) of each cell, in the same order.
    pub cell_stddevs: Vec<f64>,
    /// Changes whenever any pixel's value changes the histogram or any cell's sums; a
    /// camera's sensor noise changes it on every frame.
    pub fingerprint: u64,
}

impl Measures {
    /// Fills in the measures of `r`, reusing the cell vectors.
    pub fn fill(&mut self, r: &FrameResult) {
        let pixels = r.frame.area.max(1) as f64;
        let hist = &r.histogram;
        let count = |range: std::ops::Range<usize>| -> u64 {
            hist[range].iter().map(|&c| u64::from(c)).sum()
        };
        self.mean = r.frame.mean();
        self.dark = count(0..DARK_LEVEL + 1) as f64 / pixels;
        self.bright = count(BRIGHT_LEVEL..256) as f64 / pixels;
        let mut window = count(0..BAND_LEVELS);
        let mut widest = window;
        for top in BAND_LEVELS..256 {
            window = window + u64::from(hist[top]) - u64::from(hist[top - BAND_LEVELS]);
            widest = widest.max(window);
        }
        self.band = widest as f64 / pixels;
        self.p10 = percentile(hist, r.frame.area, 0.1);
        self.p90 = percentile(hist, r.frame.area, 0.9);
        self.gradient = r.gradient_sampled.then(|| {
            let weighted: u64 = r
                .gradient_histogram
                .iter()
                .enumerate()
                .map(|(level, &c)| level as u64 * u64::from(c))
                .sum();
            weighted as f64 / pixels
        });
        self.cell_means.clear();
        self.cell_stddevs.clear();
        for cell in &r.cells {
            self.cell_means.push(cell.mean());
            self.cell_stddevs.push(cell.stddev());
        }
        let mut h = std::collections::hash_map::DefaultHasher::new();
        hist.hash(&mut h);
        for cell in &r.cells {
            (cell.sum, cell.sqsum).hash(&mut h);
        }
        (r.frame.sum, r.frame.sqsum, r.frame.edges).hash(&mut h);
        self.fingerprint = h.finish();
    }
}

/// The lowest luma level at or below which at least `share` of the `pixels` lie.
pub fn percentile(hist: &[u32; 256], pixels: u64, share: f64) -> f64 {
    let wanted = (share * pixels as f64).ceil().max(1.0) as u64;
    let mut seen = 0u64;
    for (level, &c) in hist.iter().enumerate() {
        seen += u64::from(c);
        if seen >= wanted {
            return level as f64;
        }
    }
    255.0
}

/// The share of cells whose mean no longer matches the reference, after taking out a
/// global gain (the median of the cells' ratios), so that light and auto-exposure changes
/// do not count: a cell differs when it is more than 8 levels and 15 % off.
pub fn scene_change(means: &[f64], reference: &[f64], scratch: &mut Vec<f64>) -> f64 {
    if means.is_empty() || means.len() != reference.len() {
        return 0.0;
    }
    scratch.clear();
    scratch.extend(means.iter().zip(reference).map(|(m, r)| m / r.max(1.0)));
    let mid = scratch.len() / 2;
    let (_, gain, _) = scratch.select_nth_unstable_by(mid, f64::total_cmp);
    let gain = *gain;
    let changed = means
        .iter()
        .zip(reference)
        .filter(|&(m, r)| {
            let expected = gain * r;
            (m - expected).abs() > (0.15 * expected).max(8.0)
        })
        .count();
    changed as f64 / means.len() as f64
}

/// How well the cells' means still follow the reference's pattern (Pearson's correlation,
/// -1 to 1; 0 when either is flat): a scene in less or more light keeps its pattern, as
/// each cell averages its pixels' noise away, while a cover replaces it with its own.
pub fn pattern_correlation(means: &[f64], reference: &[f64]) -> f64 {
    let n = means.len().min(reference.len());
    if n < 2 {
        return 0.0;
    }
    let avg = |v: &[f64]| v[..n].iter().sum::<f64>() / n as f64;
    let (ma, ra) = (avg(means), avg(reference));
    let (mut cov, mut mv, mut rv) = (0.0, 0.0, 0.0);
    for (m, r) in means.iter().zip(reference).take(n) {
        let (dm, dr) = (m - ma, r - ra);
        cov += dm * dr;
        mv += dm * dm;
        rv += dr * dr;
    }
    if mv <= f64::EPSILON || rv <= f64::EPSILON {
        0.0
    } else {
        cov / (mv * rv).sqrt()
    }
}

/// Cells with at least this contrast (luma standard deviation) in the baseline have
/// detail a cover would take away; flatter ones (sky, a wall) say nothing.
pub const DETAILED_CELL_STDDEV: f64 = 6.0;

/// Among the cells that had detail in the baseline, the share that lost at least half of
/// their contrast; 0 when none had detail.
pub fn flat_cells(stddevs: &[f64], reference: &[f64]) -> f64 {
    let (mut detailed, mut flat) = (0usize, 0usize);
    for (s, r) in stddevs.iter().zip(reference) {
        if *r >= DETAILED_CELL_STDDEV {
            detailed += 1;
            if *s <= 0.5 * r {
                flat += 1;
            }
        }
    }
    if detailed == 0 {
        0.0
    } else {
        flat as f64 / detailed as f64
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use edgesight_frame::region::RegionStats;

    fn result(hist: [u32; 256], gradient: Option<[u32; 256]>) -> FrameResult {
        let mut r = FrameResult::empty();
        let (mut n, mut sum, mut sqsum) = (0u64, 0u64, 0u64);
        for (v, &c) in hist.iter().enumerate() {
            let (v, c) = (v as u64, u64::from(c));
            (n, sum, sqsum) = (n + c, sum + v * c, sqsum + v * v * c);
        }
        r.histogram = hist;
        r.frame = RegionStats {
            area: n,
            sum,
            sqsum,
            ..RegionStats::default()
        };
        if let Some(g) = gradient {
            r.gradient_histogram = g;
            r.gradient_sampled = true;
        }
        r
    }

    #[test]
    fn clipping_band_and_gradient_from_the_histograms() {
        let mut hist = [0u32; 256];
        hist[0] = 10;
        hist[8] = 10;
        hist[9] = 5;
        hist[100] = 30;
        hist[131] = 15; // inside a 32-level window with 100
        hist[132] = 5; // outside it
        hist[247] = 20;
        hist[255] = 5;
        let mut gradient = [0u32; 256];
        gradient[0] = 60;
        gradient[10] = 30;
        gradient[100] = 10;
        let mut m = Measures::default();
        m.fill(&result(hist, Some(gradient)));
        assert_eq!(m.dark, 0.2);
        assert_eq!(m.bright, 0.25);
        assert_eq!(m.band, 0.45);
        assert_eq!(m.gradient, Some(13.0));
        m.fill(&result(hist, None));
        assert_eq!(m.gradient, None);
    }

    #[test]
    fn percentiles_are_the_levels_a_share_of_the_pixels_reach() {
        let mut hist = [0u32; 256];
        hist[3] = 5;
        hist[40] = 45;
        hist[41] = 40;
        hist[200] = 10;
        assert_eq!(percentile(&hist, 100, 0.05), 3.0);
        assert_eq!(percentile(&hist, 100, 0.1), 40.0);
        assert_eq!(percentile(&hist, 100, 0.5), 40.0);
        assert_eq!(percentile(&hist, 100, 0.51), 41.0);
        assert_eq!(percentile(&hist, 100, 0.9), 41.0);
        assert_eq!(percentile(&hist, 100, 0.91), 200.0);
        assert_eq!(percentile(&[0; 256], 0, 0.5), 255.0);
        let mut m = Measures::default();
        m.fill(&result(hist, None));
        assert_eq!((m.p10, m.p90), (40.0, 41.0));
    }

    #[test]
    fn the_fingerprint_sees_one_pixel_move_between_levels() {
        let mut hist = [0u32; 256];
        hist[50] = 99;
        hist[51] = 1;
        let (mut a, mut b) = (Measures::default(), Measures::default());
        a.fill(&result(hist, None));
        b.fill(&result(hist, None));
        assert_eq!(a.fingerprint, b.fingerprint);
        hist[51] = 0;
        hist[52] = 1;
        b.fill(&result(hist, None));
        assert_ne!(a.fingerprint, b.fingerprint);
    }

    #[test]
    fn scene_change_ignores_a_global_gain_and_counts_the_cells_that_moved() {
        let reference: Vec<f64> = (0..10).map(|i| 40.0 + 15.0 * f64::from(i)).collect();
        let mut scratch = Vec::new();
        let brighter: Vec<f64> = reference.iter().map(|r| r * 1.4).collect();
        assert_eq!(scene_change(&brighter, &reference, &mut scratch), 0.0);
        let mut moved = brighter.clone();
        moved[0] = 200.0; // 56 expected
        moved[9] = 20.0; // 233 expected
        moved[5] = 115.0 * 1.4 + 7.9; // within 8 levels... and 15 %: unchanged
        assert_eq!(scene_change(&moved, &reference, &mut scratch), 0.2);
        let reversed: Vec<f64> = reference.iter().rev().copied().collect();
        assert_eq!(scene_change(&reversed, &reference, &mut scratch), 0.9);
    }

    #[test]
    fn the_pattern_survives_a_gain_and_not_a_flat_cover() {
        let reference: Vec<f64> = (0..12).map(|i| 40.0 + 9.0 * f64::from(i % 5)).collect();
        let darker: Vec<f64> = reference.iter().map(|r| r / 8.0 + 0.3).collect();
        assert!((pattern_correlation(&darker, &reference) - 1.0).abs() < 1e-12);
        let flipped: Vec<f64> = reference.iter().map(|r| 200.0 - r).collect();
        assert!((pattern_correlation(&flipped, &reference) + 1.0).abs() < 1e-12);
        assert_eq!(pattern_correlation(&[10.0; 12], &reference), 0.0);
        assert_eq!(pattern_correlation(&[1.0], &[2.0]), 0.0);
    }

    #[test]
    fn flat_cells_count_only_cells_that_had_detail() {
        let reference = [20.0, 20.0, 3.0, 10.0];
        assert_eq!(flat_cells(&[5.0, 20.0, 0.5, 5.0], &reference), 2.0 / 3.0);
        assert_eq!(flat_cells(&[1.0; 4], &[2.0; 4]), 0.0);
    }
}
