//! The motion collector: the share of a frame's pixels that moved
//! (`edgesight_motion_ratio`), each region's (`edgesight_roi_motion_ratio`) and its motion
//! events (`edgesight_roi_motion_events_total`). The publisher copies each frame's
//! [`MotionReport`] in; the regions' series come and go with their region, with the
//! others of a region ([`super::regions`]).

use prometheus::{Gauge, GaugeVec, IntCounter, IntCounterVec};

use edgesight_core::motion_events::MotionReport;
use edgesight_http::metrics::Metrics;

pub(super) struct MotionFamilies {
    motion: GaugeVec,
    pub(super) regions: RegionMotionFamilies,
}

/// The families with a series per region.
#[derive(Clone)]
pub(super) struct RegionMotionFamilies {
    motion: GaugeVec,
    events: IntCounterVec,
}

impl MotionFamilies {
    pub(super) fn new(m: &Metrics) -> MotionFamilies {
        MotionFamilies {
            motion: m.gauges(
                "edgesight_motion_ratio",
                "Fraction of the last frame's pixels that moved against the learned background (0 while it is learned, on a change of scene and while the camera is moved).",
                &["camera"],
            ),
            regions: RegionMotionFamilies {
                motion: m.gauges(
                    "edgesight_roi_motion_ratio",
                    "Fraction of a region's pixels that moved against the learned background.",
                    &["camera", "roi"],
                ),
                events: m.counters(
                    "edgesight_roi_motion_events_total",
                    "Motion events in a region: its motion ratio at [camera.motion] min_ratio or above for min_seconds (one ends below half of it for as long).",
                    &["camera", "roi"],
                ),
            },
        }
    }

    /// One camera's series (its regions' are resolved with the regions).
    pub(super) fn camera(&self, name: &str) -> MotionMetrics {
        MotionMetrics {
            motion: self.motion.with_label_values(&[name]),
        }
    }
}

impl RegionMotionFamilies {
    /// The series of the region `[camera, roi]`.
    pub(super) fn series(&self, labels: &[&str; 2]) -> RegionMotionSeries {
        RegionMotionSeries {
            motion: self.motion.with_label_values(labels),
            events: self.events.with_label_values(labels),
        }
    }

    /// Takes the series of the region `[camera, roi]` out of the export.
    pub(super) fn remove(&self, labels: &[&str; 2]) {
        // Absent already is fine: the aim is only that it is absent.
        let _ = self.motion.remove_label_values(labels);
        let _ = self.events.remove_label_values(labels);
    }
}

/// One region's motion series.
pub(super) struct RegionMotionSeries {
    motion: Gauge,
    events: IntCounter,
}

/// One camera's motion series.
pub(super) struct MotionMetrics {
    motion: Gauge,
}

impl MotionMetrics {
    /// Sets the frame's and its regions' motion from `report`, the regions' series in
    /// `regions` (in the report's order), and counts the events that `began`.
    pub(super) fn set(
        &self,
        report: &MotionReport,
        regions: &[RegionMotionSeries],
        began: impl Iterator<Item = usize>,
    ) {
        self.motion.set(report.ratio);
        for (series, region) in regions.iter().zip(&report.regions) {
            series.motion.set(region.ratio);
        }
        for i in began {
            if let Some(series) = regions.get(i) {
                series.events.inc();
            }
        }
    }
}
