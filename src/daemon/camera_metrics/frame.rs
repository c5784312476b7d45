//! The frame collector: what a published frame's results say of the whole view
//! (`edgesight_frames_total`, `edgesight_frame_latency_seconds` from its capture,
//! `edgesight_otsu_threshold`, `edgesight_mean_luma`, `edgesight_luma_stddev`,
//! `edgesight_foreground_ratio`, `edgesight_edge_ratio`, and the luma histogram's bins in
//! `edgesight_luma_bin_ratio`). The publisher copies each frame in.

use std::time::Duration;

use prometheus::{
    Gauge, GaugeVec, Histogram, HistogramVec, IntCounter, IntCounterVec, IntGauge, IntGaugeVec,
};

use edgesight_core::pipeline::FrameResult;
use edgesight_http::metrics::Metrics;

/// Capture-to-published buckets: 10 ms to 1 s, with `+Inf` eight, enough for the
/// dashboard's median and 99th percentile at a few series a camera; finest around a
/// 30 fps frame period, where latency matters most.
const LATENCY_BUCKETS: [f64; 7] = [0.01, 0.02, 0.035, 0.05, 0.1, 0.25, 1.0];

pub(super) struct FrameFamilies {
    frames: IntCounterVec,
    latency: HistogramVec,
    otsu: IntGaugeVec,
    mean_luma: GaugeVec,
    luma_stddev: GaugeVec,
    foreground: GaugeVec,
    edges: GaugeVec,
    histogram: GaugeVec,
    histogram_bins: u32,
}

impl FrameFamilies {
    /// `histogram_bins` (a power of two up to 256) is how many buckets the exported luma
    /// histogram has.
    pub(super) fn new(m: &Metrics, histogram_bins: u32) -> FrameFamilies {
        let cam = &["camera"];
        FrameFamilies {
            frames: m.counters(
                "edgesight_frames_total",
                "Frames processed and published.",
                cam,
            ),
            latency: m.histograms(
                "edgesight_frame_latency_seconds",
                "Time from a frame's capture to its results being published, in seconds.",
                cam,
                &LATENCY_BUCKETS,
            ),
            otsu: m.int_gauges(
                "edgesight_otsu_threshold",
                "Otsu threshold of the last frame's luma (0-255).",
                cam,
            ),
            mean_luma: m.gauges(
                "edgesight_mean_luma",
                "Mean luma of the last frame (0-255).",
                cam,
            ),
            luma_stddev: m.gauges(
                "edgesight_luma_stddev",
                "Standard deviation of the last frame's luma.",
                cam,
            ),
            foreground: m.gauges(
                "edgesight_foreground_ratio",
                "Fraction of the last frame's pixels above the Otsu threshold.",
                cam,
            ),
            edges: m.gauges(
                "edgesight_edge_ratio",
                "Fraction of the last frame's pixels whose gradient magnitude reaches the edge threshold.",
                cam,
            ),
            // `/api/v1/latest` has the histogram whole.
            histogram: m.detail_only(m.gauges(
                "edgesight_luma_bin_ratio",
                "Fraction of the last frame's pixels in each luma bin; bin is the bin's lowest luma.",
                &["camera", "bin"],
            )),
            histogram_bins,
        }
    }

    /// One camera's series.
    pub(super) fn camera(&self, name: &str) -> FrameMetrics {
        let l = &[name];
        FrameMetrics {
            frames: self.frames.with_label_values(l),
            latency: self.latency.with_label_values(l),
            otsu: self.otsu.with_label_values(l),
            mean_luma: self.mean_luma.with_label_values(l),
            luma_stddev: self.luma_stddev.with_label_values(l),
            foreground: self.foreground.with_label_values(l),
            edges: self.edges.with_label_values(l),
            histogram: (0..self.histogram_bins)
                .map(|b| {
                    let low = (b * (256 / self.histogram_bins)).to_string();
                    self.histogram.with_label_values(&[name, &low])
                })
                .collect(),
        }
    }
}

/// One camera's frame series.
pub(super) struct FrameMetrics {
    frames: IntCounter,
    latency: Histogram,
    otsu: IntGauge,
    mean_luma: Gauge,
    luma_stddev: Gauge,
    foreground: Gauge,
    edges: Gauge,
    histogram: Vec<Gauge>,
}

impl FrameMetrics {
    /// Counts a frame and copies its results in; `latency` is capture to now.
    pub(super) fn set(&self, result: &FrameResult, latency: Duration) {
        self.frames.inc();
        self.latency.observe(latency.as_secs_f64());
        self.otsu.set(i64::from(result.otsu_threshold));
        self.mean_luma.set(result.frame.mean());
        self.luma_stddev.set(result.frame.stddev());
        self.foreground.set(result.frame.foreground_ratio());
        self.edges.set(result.frame.edge_ratio());
        let pixels = result.frame.area.max(1) as f64;
        let per_bin = 256 / self.histogram.len();
        for (bin, gauge) in self.histogram.iter().enumerate() {
            let count: u64 = result.histogram[bin * per_bin..(bin + 1) * per_bin]
                .iter()
                .map(|&c| u64::from(c))
                .sum();
            gauge.set(count as f64 / pixels);
        }
    }
}
