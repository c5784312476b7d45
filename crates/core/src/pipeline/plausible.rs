//! What no right device writes, checked on every frame's results before anything reads
//! them. A broken driver (a vendor's libmali with a compiler bug, a GPU that hangs and
//! leaves its buffers as they were) must cost a frame counted under the stage that wrote
//! it, never a panic, nor metrics and events made of garbage.
//!
//! The checks are what the results must agree on whatever the frame: the histogram counts
//! every pixel once; the threshold is a luma value; the frame's sum, squared sum and
//! foreground, which the region stage takes from the integrals, are what the histogram
//! says they are; no region holds more, or other moments, than its pixels can; motion's
//! counts cover its tiles once. A few hundred additions a frame.

use super::{PipelineError, Stage};
use edgesight_frame::region::RegionStats;

/// The results of one frame as read back, before they are interpreted.
pub(super) struct RawResults<'a> {
    pub pixels: u64,
    pub histogram: &'a [u32; 256],
    /// The word the threshold kernel wrote (a luma value, 0 to 255).
    pub threshold: u32,
    pub frame: &'a RegionStats,
    /// Every configured region's and health cell's sums.
    pub regions: &'a mut dyn Iterator<Item = &'a RegionStats>,
    /// The gradient histogram, on the frames that count it.
    pub gradients: Option<&'a [u32; 256]>,
}

fn implausible(stage: Stage, what: String) -> PipelineError {
    PipelineError::Implausible { stage, what }
}

/// The histogram's counts, summed without overflow.
fn total(counts: &[u32]) -> u64 {
    counts.iter().map(|&c| u64::from(c)).sum()
}

/// Why a region's sums cannot be those of its 8-bit pixels.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
enum ImpossibleSums {
    /// A sum or squared sum beyond what pixels of at most 255 make.
    #[error("sum {sum} and squared sum {sqsum} over {area} pixels")]
    OverRange { sum: u64, sqsum: u64, area: u64 },
    /// A squared sum below what the sum makes it (area x sqsum >= sum², Cauchy-Schwarz).
    #[error("squared sum {sqsum} too small for sum {sum} over {area} pixels")]
    SquaresTooSmall { sum: u64, sqsum: u64, area: u64 },
    /// More pixels of a kind (`what`: edge, foreground, moving) than the region has.
    #[error("{count} {what} pixels of {area}")]
    CountOver {
        what: &'static str,
        count: u64,
        area: u64,
    },
}

/// Whether `s` could be the sums of `s.area` 8-bit pixels: each at most 255 (its square at
/// most 255²), the counts at most the pixels, and the squared sum at least what the sum
/// makes it.
fn possible(s: &RegionStats) -> Result<(), ImpossibleSums> {
    let n = u128::from(s.area);
    let (sum, sqsum) = (u128::from(s.sum), u128::from(s.sqsum));
    let (s_sum, s_sqsum, area) = (s.sum, s.sqsum, s.area);
    if sum > 255 * n || sqsum > 255 * 255 * n {
        return Err(ImpossibleSums::OverRange {
            sum: s_sum,
            sqsum: s_sqsum,
            area,
        });
    }
    if n * sqsum < sum * sum {
        return Err(ImpossibleSums::SquaresTooSmall {
            sum: s_sum,
            sqsum: s_sqsum,
            area,
        });
    }
    for (what, count) in [
        ("edge", s.edges),
        ("foreground", s.foreground),
        ("moving", s.motion),
    ] {
        if count > s.area {
            return Err(ImpossibleSums::CountOver { what, count, area });
        }
    }
    Ok(())
}

/// Checks one frame's results; the error names the stage whose output is impossible.
pub(super) fn check(r: RawResults) -> Result<(), PipelineError> {
    let counted = total(r.histogram);
    if counted != r.pixels {
        return Err(implausible(
            Stage::Histogram,
            format!("the luma histogram counts {counted} pixels of {}", r.pixels),
        ));
    }
    if r.threshold > 255 {
        return Err(implausible(
            Stage::Otsu,
            format!("threshold {} is no luma value", r.threshold),
        ));
    }
    if let Some(gradients) = r.gradients {
        let counted = total(gradients);
        if counted != r.pixels {
            return Err(implausible(
                Stage::Health,
                format!(
                    "the gradient histogram counts {counted} pixels of {}",
                    r.pixels
                ),
            ));
        }
    }
    let (mut sum, mut sqsum, mut above) = (0u64, 0u64, 0u64);
    for (value, &count) in (0u64..).zip(r.histogram) {
        sum += value * u64::from(count);
        sqsum += value * value * u64::from(count);
        if value > u64::from(r.threshold) {
            above += u64::from(count);
        }
    }
    let f = r.frame;
    if (f.sum, f.sqsum, f.foreground) != (sum, sqsum, above) {
        return Err(implausible(
            Stage::Regions,
            format!(
                "the frame's sum, squared sum and foreground are {}, {} and {}; its \
                 histogram says {sum}, {sqsum} and {above}",
                f.sum, f.sqsum, f.foreground
            ),
        ));
    }
    possible(f).map_err(|e| implausible(Stage::Regions, format!("the frame: {e}")))?;
    for (i, s) in r.regions.enumerate() {
        possible(s).map_err(|e| implausible(Stage::Regions, format!("region {i}: {e}")))?;
    }
    Ok(())
}

/// Checks motion's counts over `tiles` tiles before the host's control reads them.
pub(super) fn check_motion(
    diff_histogram: &[u32],
    moving: u32,
    tiles: u32,
) -> Result<(), PipelineError> {
    let counted = total(diff_histogram);
    if counted != u64::from(tiles) || moving > tiles {
        return Err(implausible(
            Stage::Integral,
            format!("motion's histogram counts {counted} tiles and {moving} moving, of {tiles}"),
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A 4-pixel frame of luma 0, 10, 10, 200 with threshold 10, as a right device reads
    /// it back.
    fn right() -> ([u32; 256], RegionStats) {
        let mut histogram = [0; 256];
        histogram[0] = 1;
        histogram[10] = 2;
        histogram[200] = 1;
        let frame = RegionStats {
            area: 4,
            sum: 220,
            sqsum: 40_200,
            edges: 2,
            foreground: 1,
            motion: 0,
        };
        (histogram, frame)
    }

    fn checked(
        histogram: &[u32; 256],
        threshold: u32,
        frame: &RegionStats,
        regions: &[RegionStats],
    ) -> Result<(), String> {
        let mut regions = regions.iter();
        check(RawResults {
            pixels: 4,
            histogram,
            threshold,
            frame,
            regions: &mut regions,
            gradients: None,
        })
        .map_err(|e| e.to_string())
    }

    #[test]
    fn impossible_sums_say_which_bound_they_break() {
        let two = RegionStats {
            area: 2,
            sum: 20,
            sqsum: 200,
            edges: 0,
            foreground: 0,
            motion: 0,
        };
        assert_eq!(possible(&two), Ok(()));
        assert_eq!(
            possible(&RegionStats { sum: 511, ..two }),
            Err(ImpossibleSums::OverRange {
                sum: 511,
                sqsum: 200,
                area: 2
            })
        );
        assert_eq!(
            possible(&RegionStats { sqsum: 199, ..two }),
            Err(ImpossibleSums::SquaresTooSmall {
                sum: 20,
                sqsum: 199,
                area: 2
            })
        );
        assert_eq!(
            possible(&RegionStats { motion: 3, ..two }),
            Err(ImpossibleSums::CountOver {
                what: "moving",
                count: 3,
                area: 2
            })
        );
    }

    #[test]
    fn right_results_pass_and_each_impossibility_names_its_stage() {
        let (hist, frame) = right();
        let part = RegionStats {
            area: 2,
            sum: 20,
            sqsum: 200,
            edges: 1,
            foreground: 0,
            motion: 2,
        };
        assert_eq!(checked(&hist, 10, &frame, &[part]), Ok(()));

        let mut lost = hist;
        lost[10] = 1;
        assert_eq!(
            checked(&lost, 10, &frame, &[]).unwrap_err(),
            "histogram stage: the device's results are impossible: the luma histogram counts 3 pixels of 4"
        );
        assert!(checked(&hist, 256, &frame, &[])
            .unwrap_err()
            .starts_with("otsu stage"));
        for wrong in [
            RegionStats { sum: 221, ..frame },
            RegionStats {
                sqsum: 40_201,
                ..frame
            },
            RegionStats {
                foreground: 2,
                ..frame
            },
            RegionStats { edges: 5, ..frame },
        ] {
            assert!(
                checked(&hist, 10, &wrong, &[])
                    .unwrap_err()
                    .starts_with("regions stage"),
                "{wrong:?}"
            );
        }
        for wrong in [
            RegionStats { sum: 511, ..part },
            RegionStats { sqsum: 199, ..part },
            RegionStats { motion: 3, ..part },
            RegionStats {
                sqsum: u64::MAX,
                sum: u64::MAX,
                ..part
            },
        ] {
            let e = checked(&hist, 10, &frame, &[part, wrong]).unwrap_err();
            assert!(e.contains("region 1: "), "{e}");
        }
    }

    #[test]
    fn motion_counts_cover_the_tiles_once() {
        let mut h = [0u32; 64];
        h[3] = 10;
        h[63] = 2;
        assert!(check_motion(&h, 2, 12).is_ok());
        assert!(check_motion(&h, 13, 12).is_err());
        assert!(check_motion(&h, 2, 11).is_err());
        h[5] = u32::MAX;
        assert!(check_motion(&h, 2, 12).is_err());
    }
}
