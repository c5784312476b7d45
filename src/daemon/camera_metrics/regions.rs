//! The region collector: each region of interest's luma mean and deviation, edge and
//! foreground ratios (`edgesight_roi_mean_luma`, `edgesight_roi_luma_stddev`,
//! `edgesight_roi_edge_ratio`, `edgesight_roi_foreground_ratio`), and the lifecycle of
//! every series of a region, motion's included: resolved when a camera's regions change,
//! taken out of the export when their region goes. The publisher copies each frame's
//! region sums in.

use prometheus::{Gauge, GaugeVec};

use super::motion::{self, RegionMotionSeries};
use edgesight_frame::region::{Region, RegionStats};
use edgesight_http::metrics::Metrics;

#[derive(Clone)]
pub(super) struct RegionFamilies {
    mean: GaugeVec,
    stddev: GaugeVec,
    edges: GaugeVec,
    foreground: GaugeVec,
    /// Motion's families of a series per region, which live and go with these.
    motion: motion::RegionMotionFamilies,
}

impl RegionFamilies {
    pub(super) fn new(m: &Metrics, motion: motion::RegionMotionFamilies) -> RegionFamilies {
        let roi = &["camera", "roi"];
        RegionFamilies {
            mean: m.gauges(
                "edgesight_roi_mean_luma",
                "Mean luma inside a region of interest (0-255).",
                roi,
            ),
            stddev: m.gauges(
                "edgesight_roi_luma_stddev",
                "Standard deviation of luma inside a region of interest.",
                roi,
            ),
            edges: m.gauges(
                "edgesight_roi_edge_ratio",
                "Fraction of a region's pixels that are edges.",
                roi,
            ),
            foreground: m.gauges(
                "edgesight_roi_foreground_ratio",
                "Fraction of a region's pixels above the Otsu threshold.",
                roi,
            ),
            motion,
        }
    }

    /// One camera's region series: none until its first frame.
    pub(super) fn camera(&self, name: &str) -> RegionSeries {
        RegionSeries {
            camera: name.to_string(),
            families: self.clone(),
            regions: Vec::new(),
            motion: Vec::new(),
        }
    }
}

/// One region's series, resolved once.
struct RoiGauges {
    name: String,
    mean: Gauge,
    stddev: Gauge,
    edges: Gauge,
    foreground: Gauge,
}

/// The series of the regions a camera exports now, resolved when its regions change (the
/// first frame after a reload), so that a frame with the same regions as the last one
/// sets plain atomics, with no label lookup and no allocation.
pub(super) struct RegionSeries {
    camera: String,
    families: RegionFamilies,
    regions: Vec<RoiGauges>,
    /// Each region's motion series, in the order of `regions`.
    motion: Vec<RegionMotionSeries>,
}

impl RegionSeries {
    /// Copies a frame's region sums in, resolving the series first where the regions
    /// changed.
    pub(super) fn set(&mut self, regions: &[(Region, RegionStats)]) {
        if !self.holds(regions) {
            self.resolve(regions);
        }
        for (series, (_, stats)) in self.regions.iter().zip(regions) {
            series.mean.set(stats.mean());
            series.stddev.set(stats.stddev());
            series.edges.set(stats.edge_ratio());
            series.foreground.set(stats.foreground_ratio());
        }
    }

    /// The motion series of the regions of the last frame, in its order.
    pub(super) fn motion(&self) -> &[RegionMotionSeries] {
        &self.motion
    }

    fn holds(&self, regions: &[(Region, RegionStats)]) -> bool {
        self.regions.len() == regions.len()
            && self
                .regions
                .iter()
                .zip(regions)
                .all(|(held, (r, _))| held.name == r.name)
    }

    /// Resolves the series of `regions`; those of regions gone vanish from the export.
    fn resolve(&mut self, regions: &[(Region, RegionStats)]) {
        let f = &self.families;
        let camera = self.camera.as_str();
        for gone in &self.regions {
            if regions.iter().any(|(r, _)| r.name == gone.name) {
                continue;
            }
            let labels = [camera, gone.name.as_str()];
            for family in [&f.mean, &f.stddev, &f.edges, &f.foreground] {
                // Absent already is fine: the aim is only that it is absent.
                let _ = family.remove_label_values(&labels);
            }
            f.motion.remove(&labels);
        }
        self.regions = regions
            .iter()
            .map(|(r, _)| {
                let labels = [camera, r.name.as_str()];
                RoiGauges {
                    name: r.name.clone(),
                    mean: f.mean.with_label_values(&labels),
                    stddev: f.stddev.with_label_values(&labels),
                    edges: f.edges.with_label_values(&labels),
                    foreground: f.foreground.with_label_values(&labels),
                }
            })
            .collect();
        self.motion = regions
            .iter()
            .map(|(r, _)| f.motion.series(&[camera, r.name.as_str()]))
            .collect();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn region(name: &str, mean: u64) -> (Region, RegionStats) {
        let region = Region {
            name: name.into(),
            x: 0,
            y: 0,
            width: 2,
            height: 2,
        };
        let stats = RegionStats {
            area: 4,
            sum: 4 * mean,
            // Every pixel at `mean`: the moments of a real region.
            sqsum: 4 * mean * mean,
            ..RegionStats::default()
        };
        (region, stats)
    }

    #[test]
    fn roi_series_follow_the_regions_and_removed_ones_vanish() {
        let metrics = Metrics::new();
        let motion = motion::MotionFamilies::new(&metrics);
        let mut m = RegionFamilies::new(&metrics, motion.regions).camera("c");
        let mean = |roi: &str| {
            metrics.sample(&format!(
                r#"edgesight_roi_mean_luma{{camera="c",roi="{roi}"}}"#
            ))
        };
        let mut regions = vec![region("a", 10), region("b", 20)];
        m.set(&regions);
        assert_eq!((mean("a"), mean("b")), (Some(10.0), Some(20.0)));
        // The same regions again: the held series take the new values.
        regions = vec![region("a", 11), region("b", 21)];
        m.set(&regions);
        assert_eq!((mean("a"), mean("b")), (Some(11.0), Some(21.0)));
        // A reload: `a` goes, `c` comes, `b` stays, now second.
        regions = vec![region("c", 30), region("b", 22)];
        m.set(&regions);
        assert_eq!(mean("a"), None);
        assert_eq!((mean("b"), mean("c")), (Some(22.0), Some(30.0)));
        // Motion's series of a region go with it.
        let events = |roi: &str| {
            metrics.sample(&format!(
                r#"edgesight_roi_motion_events_total{{camera="c",roi="{roi}"}}"#
            ))
        };
        assert_eq!((events("a"), events("b")), (None, Some(0.0)));
        regions.clear();
        m.set(&regions);
        assert_eq!((mean("b"), mean("c")), (None, None));
    }
}
