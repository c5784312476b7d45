//! Every Prometheus family the daemon exports: its name, help, labels and buckets, beside
//! the code that copies a camera's state into it.
//!
//! Stages never touch the registry: the capture/GPU thread fills the capture counters
//! ([`CameraMetrics::capture`]) and the publisher copies each [`FrameResult`] in
//! ([`CameraMetrics::frame`]). All updates are atomics on pre-resolved children, so
//! a scrape never makes a camera wait.

use std::collections::BTreeSet;
use std::sync::Mutex;
use std::time::Duration;

use prometheus::{
    core::Collector, Encoder, Gauge, GaugeVec, Histogram, HistogramOpts, HistogramVec, IntCounter,
    IntCounterVec, IntGauge, IntGaugeVec, Opts, Registry, TextEncoder,
};

use crate::capture::{CaptureStats, DropReason};
use crate::cl::ClDeviceInfo;
use crate::pipeline::{FrameResult, Stage};

/// Why a frame was lost after the pipeline: the publisher had not taken the previous ones.
pub const DROP_PUBLISH_BACKLOG: &str = "publish_backlog";

/// Device time buckets: 50 µs to 250 ms, for stages from a GPU's fraction of a millisecond
/// to a slow CPU driver's tens of milliseconds.
const STAGE_BUCKETS: [f64; 12] = [
    0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25,
];
/// Capture-to-published buckets: 2.5 ms to 2.5 s, finest around a 30 fps frame period
/// where latency matters most.
const LATENCY_BUCKETS: [f64; 16] = [
    0.0025, 0.005, 0.01, 0.015, 0.02, 0.03, 0.04, 0.05, 0.065, 0.08, 0.1, 0.15, 0.2, 0.35, 0.6, 2.5,
];

/// The process-wide families; one [`CameraMetrics`] per camera hangs off them.
pub struct Metrics {
    registry: Registry,
    device_info: IntGaugeVec,
    camera_up: IntGaugeVec,
    frames: IntCounterVec,
    dropped: IntCounterVec,
    reconnects: IntCounterVec,
    restarts: IntCounterVec,
    pipeline_errors: IntCounterVec,
    stage: HistogramVec,
    latency: HistogramVec,
    frame_rate: GaugeVec,
    target_rate: GaugeVec,
    otsu: IntGaugeVec,
    mean_luma: GaugeVec,
    luma_stddev: GaugeVec,
    foreground: GaugeVec,
    edges: GaugeVec,
    histogram: GaugeVec,
    roi_mean: GaugeVec,
    roi_stddev: GaugeVec,
    roi_edges: GaugeVec,
    roi_foreground: GaugeVec,
    pub reloads: IntCounterVec,
    pub http_requests: IntCounterVec,
    histogram_bins: u32,
}

fn register<C: Collector + Clone + 'static>(registry: &Registry, c: C) -> C {
    // Names are fixed and unique: a failure here is a programming error caught by tests.
    registry
        .register(Box::new(c.clone()))
        .expect("metric families are unique");
    c
}

fn gauges(registry: &Registry, name: &str, help: &str, labels: &[&str]) -> GaugeVec {
    register(
        registry,
        GaugeVec::new(Opts::new(name, help), labels).expect("valid gauge"),
    )
}

fn int_gauges(registry: &Registry, name: &str, help: &str, labels: &[&str]) -> IntGaugeVec {
    register(
        registry,
        IntGaugeVec::new(Opts::new(name, help), labels).expect("valid gauge"),
    )
}

fn counters(registry: &Registry, name: &str, help: &str, labels: &[&str]) -> IntCounterVec {
    register(
        registry,
        IntCounterVec::new(Opts::new(name, help), labels).expect("valid counter"),
    )
}

fn histograms(
    registry: &Registry,
    name: &str,
    help: &str,
    labels: &[&str],
    buckets: &[f64],
) -> HistogramVec {
    register(
        registry,
        HistogramVec::new(
            HistogramOpts::new(name, help).buckets(buckets.to_vec()),
            labels,
        )
        .expect("valid histogram"),
    )
}

impl Metrics {
    /// Registers every family; `histogram_bins` (a power of two up to 256) is how many
    /// buckets the exported luma histogram has.
    pub fn new(histogram_bins: u32) -> Metrics {
        let r = Registry::new();
        #[cfg(target_os = "linux")]
        r.register(Box::new(
            prometheus::process_collector::ProcessCollector::for_self(),
        ))
        .expect("the process collector registers once");
        let build = int_gauges(
            &r,
            "edgesight_build_info",
            "Always 1; the labels say which edgesight is running.",
            &["version"],
        );
        build.with_label_values(&[env!("CARGO_PKG_VERSION")]).set(1);
        let cam = &["camera"];
        Metrics {
            device_info: int_gauges(
                &r,
                "edgesight_opencl_device_info",
                "Always 1; the OpenCL device a camera's pipeline runs on.",
                &["camera", "platform", "device", "version"],
            ),
            camera_up: int_gauges(
                &r,
                "edgesight_camera_up",
                "1 while the camera can deliver frames, 0 while it is gone.",
                cam,
            ),
            frames: counters(
                &r,
                "edgesight_frames_total",
                "Frames processed and published.",
                cam,
            ),
            dropped: counters(
                &r,
                "edgesight_frames_dropped_total",
                "Frames lost, by reason: capture gaps, damaged or short buffers, bad replay images, or a publisher that fell behind.",
                &["camera", "reason"],
            ),
            reconnects: counters(
                &r,
                "edgesight_camera_reconnects_total",
                "Times the camera was lost and opened again.",
                cam,
            ),
            restarts: counters(
                &r,
                "edgesight_camera_restarts_total",
                "Times the camera failed (its OpenCL device, its source, its pipeline) and was opened again after a delay.",
                cam,
            ),
            pipeline_errors: counters(
                &r,
                "edgesight_pipeline_errors_total",
                "Frames the OpenCL pipeline failed on.",
                cam,
            ),
            stage: histograms(
                &r,
                "edgesight_stage_duration_seconds",
                "Device time of each pipeline stage per frame, in seconds, from OpenCL profiling events.",
                &["camera", "stage"],
                &STAGE_BUCKETS,
            ),
            latency: histograms(
                &r,
                "edgesight_frame_latency_seconds",
                "Time from a frame's capture to its results being published, in seconds.",
                cam,
                &LATENCY_BUCKETS,
            ),
            frame_rate: gauges(
                &r,
                "edgesight_frame_rate",
                "Frames published per second, measured over the last two seconds.",
                cam,
            ),
            target_rate: gauges(
                &r,
                "edgesight_target_frame_rate",
                "Frames per second the source is set to deliver (absent when the camera chooses).",
                cam,
            ),
            otsu: int_gauges(
                &r,
                "edgesight_otsu_threshold",
                "Otsu threshold of the last frame's luma (0-255).",
                cam,
            ),
            mean_luma: gauges(
                &r,
                "edgesight_mean_luma",
                "Mean luma of the last frame (0-255).",
                cam,
            ),
            luma_stddev: gauges(
                &r,
                "edgesight_luma_stddev",
                "Standard deviation of the last frame's luma.",
                cam,
            ),
            foreground: gauges(
                &r,
                "edgesight_foreground_ratio",
                "Fraction of the last frame's pixels above the Otsu threshold.",
                cam,
            ),
            edges: gauges(
                &r,
                "edgesight_edge_ratio",
                "Fraction of the last frame's pixels whose gradient magnitude reaches the edge threshold.",
                cam,
            ),
            histogram: gauges(
                &r,
                "edgesight_luma_bin_ratio",
                "Fraction of the last frame's pixels in each luma bin; bin is the bin's lowest luma.",
                &["camera", "bin"],
            ),
            roi_mean: gauges(
                &r,
                "edgesight_roi_mean_luma",
                "Mean luma inside a region of interest (0-255).",
                &["camera", "roi"],
            ),
            roi_stddev: gauges(
                &r,
                "edgesight_roi_luma_stddev",
                "Standard deviation of luma inside a region of interest.",
                &["camera", "roi"],
            ),
            roi_edges: gauges(
                &r,
                "edgesight_roi_edge_ratio",
                "Fraction of a region's pixels that are edges.",
                &["camera", "roi"],
            ),
            roi_foreground: gauges(
                &r,
                "edgesight_roi_foreground_ratio",
                "Fraction of a region's pixels above the Otsu threshold.",
                &["camera", "roi"],
            ),
            reloads: counters(
                &r,
                "edgesight_config_reloads_total",
                "Configuration reloads on SIGHUP, by result (success or failure).",
                &["result"],
            ),
            http_requests: counters(
                &r,
                "edgesight_http_requests_total",
                "HTTP requests answered, by handler and status code.",
                &["handler", "code"],
            ),
            registry: r,
            histogram_bins,
        }
    }

    /// The handles one camera's threads update; `target_fps` is the rate its source is set
    /// to, when the config says it. The camera is down until its source says otherwise.
    pub fn camera(&self, name: &str, target_fps: Option<f64>) -> CameraMetrics {
        if let Some(fps) = target_fps {
            self.target_rate.with_label_values(&[name]).set(fps);
        }
        let l = &[name];
        let dropped = |reason: &str| self.dropped.with_label_values(&[name, reason]);
        CameraMetrics {
            name: name.to_string(),
            up: self.camera_up.with_label_values(l),
            frames: self.frames.with_label_values(l),
            capture_dropped: DropReason::ALL.map(|r| dropped(r.name())),
            backlog_dropped: dropped(DROP_PUBLISH_BACKLOG),
            reconnects: self.reconnects.with_label_values(l),
            restarts: self.restarts.with_label_values(l),
            device_info: self.device_info.clone(),
            pipeline_errors: self.pipeline_errors.with_label_values(l),
            stages: Stage::ALL.map(|s| self.stage.with_label_values(&[name, s.name()])),
            latency: self.latency.with_label_values(l),
            frame_rate: self.frame_rate.with_label_values(l),
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
            roi: RoiFamilies {
                mean: self.roi_mean.clone(),
                stddev: self.roi_stddev.clone(),
                edges: self.roi_edges.clone(),
                foreground: self.roi_foreground.clone(),
            },
            roi_names: Mutex::new(BTreeSet::new()),
            last_capture: Mutex::new(CaptureStats::default()),
        }
    }

    /// The text exposition of every family.
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(16 * 1024);
        // Encoding into a Vec fails only on families that break the format, which the
        // registry refuses at registration.
        if let Err(e) = TextEncoder::new().encode(&self.registry.gather(), &mut out) {
            tracing::error!("encoding metrics: {e}");
        }
        out
    }
}

struct RoiFamilies {
    mean: GaugeVec,
    stddev: GaugeVec,
    edges: GaugeVec,
    foreground: GaugeVec,
}

/// One camera's series, resolved once so that updates are plain atomics.
pub struct CameraMetrics {
    pub name: String,
    up: IntGauge,
    frames: IntCounter,
    capture_dropped: [IntCounter; DropReason::ALL.len()],
    pub backlog_dropped: IntCounter,
    reconnects: IntCounter,
    pub restarts: IntCounter,
    device_info: IntGaugeVec,
    pub pipeline_errors: IntCounter,
    stages: [Histogram; Stage::ALL.len()],
    latency: Histogram,
    pub frame_rate: Gauge,
    otsu: IntGauge,
    mean_luma: Gauge,
    luma_stddev: Gauge,
    foreground: Gauge,
    edges: Gauge,
    histogram: Vec<Gauge>,
    roi: RoiFamilies,
    /// The ROI label values exported now, so that regions removed by a reload vanish.
    roi_names: Mutex<BTreeSet<String>>,
    last_capture: Mutex<CaptureStats>,
}

impl CameraMetrics {
    pub fn set_up(&self, up: bool) {
        self.up.set(i64::from(up));
    }

    /// Names the OpenCL device the camera runs on (once it was opened on one).
    pub fn set_device(&self, device: &ClDeviceInfo) {
        self.device_info
            .with_label_values(&[&self.name, &device.platform, &device.name, &device.version])
            .set(1);
    }

    /// Copies a source's running totals in (counters grow by the difference).
    pub fn capture(&self, up: bool, stats: &CaptureStats) {
        self.up.set(i64::from(up));
        let Ok(mut last) = self.last_capture.lock() else {
            return;
        };
        for reason in DropReason::ALL {
            let i = reason as usize;
            self.capture_dropped[i].inc_by(stats.dropped[i].saturating_sub(last.dropped[i]));
        }
        self.reconnects
            .inc_by(stats.reconnects.saturating_sub(last.reconnects));
        *last = *stats;
    }

    /// Copies one frame's results in; `latency` is capture to now.
    pub fn frame(&self, result: &FrameResult, latency: Duration) {
        self.frames.inc();
        for (stage, ns) in result.timings.iter() {
            self.stages[stage as usize].observe(ns as f64 / 1e9);
        }
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
        let Ok(mut names) = self.roi_names.lock() else {
            return;
        };
        let now: BTreeSet<String> = result.regions.iter().map(|(r, _)| r.name.clone()).collect();
        for gone in names.difference(&now) {
            let labels = [self.name.as_str(), gone.as_str()];
            for family in [
                &self.roi.mean,
                &self.roi.stddev,
                &self.roi.edges,
                &self.roi.foreground,
            ] {
                // Absent already is fine: the aim is only that it is absent.
                let _ = family.remove_label_values(&labels);
            }
        }
        for (region, stats) in &result.regions {
            let labels = [self.name.as_str(), region.name.as_str()];
            self.roi.mean.with_label_values(&labels).set(stats.mean());
            self.roi
                .stddev
                .with_label_values(&labels)
                .set(stats.stddev());
            self.roi
                .edges
                .with_label_values(&labels)
                .set(stats.edge_ratio());
            self.roi
                .foreground
                .with_label_values(&labels)
                .set(stats.foreground_ratio());
        }
        *names = now;
    }
}
