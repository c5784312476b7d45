//! The families a camera's threads set: capture, frames, stage timings and errors, the
//! frame's numbers and its regions'. The capture/GPU thread fills the capture counters
//! ([`CameraMetrics::capture`]) and stage errors ([`CameraMetrics::pipeline_error`]), and
//! the publisher copies each [`FrameResult`] in ([`CameraMetrics::frame`]); stages never
//! touch the registry.
//!
//! One room, long as it is: a camera's families and the code that sets them, each
//! family's help text beside it (most of the length), then its unit tests.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use prometheus::{
    Gauge, GaugeVec, Histogram, HistogramVec, IntCounter, IntCounterVec, IntGauge, IntGaugeVec,
};

use super::verify::{VerifyFamilies, VerifyMetrics};
use crate::activity::MotionReport;
use crate::capture::{CaptureStats, MAX_FPS};
use crate::cl::{ClDeviceInfo, Timing};
use crate::frame::DropReason;
use crate::mailbox::{Activity, DROP_PUBLISH_BACKLOG};
use crate::metrics::{Metrics, PIPELINE_STAGE};
use crate::pipeline::{FrameResult, PipelineError, Stage};
use crate::region::{Region, RegionStats};
use health::{HealthFamilies, HealthMetrics};

pub mod health;

/// The stage times are measured on one frame in this many: a few samples a second give
/// the duration histograms their shape, and an untimed frame asks the driver for no
/// events ([`crate::pipeline::Pipeline::time_every`]).
pub const TIMED_FRAMES: u64 = 8;

/// Device time buckets: 50 µs to 250 ms, for stages from a GPU's fraction of a millisecond
/// to a slow CPU driver's tens of milliseconds.
const STAGE_BUCKETS: [f64; 12] = [
    0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25,
];
/// Capture-to-published buckets: 10 ms to 1 s, with `+Inf` eight, enough for the
/// dashboard's median and 99th percentile at a few series a camera; finest around a
/// 30 fps frame period, where latency matters most.
const LATENCY_BUCKETS: [f64; 7] = [0.01, 0.02, 0.035, 0.05, 0.1, 0.25, 1.0];

/// The per-camera families; one [`CameraMetrics`] per camera hangs off them.
pub struct CameraFamilies {
    device_info: IntGaugeVec,
    camera_up: IntGaugeVec,
    frames: IntCounterVec,
    dropped: IntCounterVec,
    reconnects: IntCounterVec,
    restarts: IntCounterVec,
    pipeline_errors: IntCounterVec,
    stage_errors: IntCounterVec,
    stage: HistogramVec,
    latency: HistogramVec,
    frame_rate: GaugeVec,
    target_rate: GaugeVec,
    otsu: IntGaugeVec,
    mean_luma: GaugeVec,
    luma_stddev: GaugeVec,
    foreground: GaugeVec,
    edges: GaugeVec,
    motion: GaugeVec,
    histogram: GaugeVec,
    roi: RoiFamilies,
    health: HealthFamilies,
    verify: VerifyFamilies,
    histogram_bins: u32,
}

impl CameraFamilies {
    /// Registers the camera families in `metrics`; `histogram_bins` (a power of two up
    /// to 256) is how many buckets the exported luma histogram has.
    pub fn new(metrics: &Metrics, histogram_bins: u32) -> CameraFamilies {
        let m = metrics;
        let cam = &["camera"];
        CameraFamilies {
            device_info: m.int_gauges(
                "edgesight_opencl_device_info",
                "Always 1, once for each OpenCL device a camera's pipeline runs on; timing says whose clock the stage times are on: device (profiling events) or host (the driver gives no profiling queue).",
                &["platform", "device", "version", "timing"],
            ),
            camera_up: m.int_gauges(
                "edgesight_camera_up",
                "1 while the camera can deliver frames, 0 while it is gone.",
                cam,
            ),
            frames: m.counters(
                "edgesight_frames_total",
                "Frames processed and published.",
                cam,
            ),
            dropped: m.counters(
                "edgesight_frames_dropped_total",
                "Frames lost, by reason: capture gaps, damaged or short buffers, bad replay images, or a publisher that fell behind.",
                &["camera", "reason"],
            ),
            reconnects: m.counters(
                "edgesight_camera_reconnects_total",
                "Times the camera was lost and opened again.",
                cam,
            ),
            restarts: m.counters(
                "edgesight_camera_restarts_total",
                "Times the camera failed (its OpenCL device, its source, its pipeline) and was opened again after a delay.",
                cam,
            ),
            pipeline_errors: m.counters(
                "edgesight_pipeline_errors_total",
                "Frames the OpenCL pipeline failed on.",
                cam,
            ),
            stage_errors: m.counters(
                "edgesight_stage_errors_total",
                "Frames a pipeline stage failed on, by stage (a part of edgesight_pipeline_errors_total).",
                &["camera", "stage"],
            ),
            stage: m.histograms(
                "edgesight_stage_duration_seconds",
                &format!(
                    "Device time of each pipeline stage per frame, in seconds, from OpenCL \
                     profiling events (from the host's clock where the driver gives none: \
                     edgesight_opencl_device_info's timing), measured on one frame in \
                     {TIMED_FRAMES}; stage pipeline, the sum of a frame's stages; and stage decode, the host time of decoding a JPEG \
                     frame's luma, on every frame of a source that delivers JPEG."
                ),
                &["camera", "stage"],
                &STAGE_BUCKETS,
            ),
            latency: m.histograms(
                "edgesight_frame_latency_seconds",
                "Time from a frame's capture to its results being published, in seconds.",
                cam,
                &LATENCY_BUCKETS,
            ),
            frame_rate: m.gauges(
                "edgesight_frame_rate",
                "Frames published per second over the last 30 seconds, up to now: bursts read as their average, and a stalled camera falls to 0 within 30 seconds.",
                cam,
            ),
            target_rate: m.gauges(
                "edgesight_target_frame_rate",
                "Frames per second the source is set to deliver: the configured rate, else the rate the camera's driver reports (absent when neither is known).",
                cam,
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
            motion: m.gauges(
                "edgesight_motion_ratio",
                "Fraction of the last frame's pixels that moved against the learned background (0 while it is learned, on a change of scene and while the camera is moved).",
                cam,
            ),
            histogram: m.gauges(
                "edgesight_luma_bin_ratio",
                "Fraction of the last frame's pixels in each luma bin; bin is the bin's lowest luma.",
                &["camera", "bin"],
            ),
            roi: RoiFamilies {
                mean: m.gauges(
                    "edgesight_roi_mean_luma",
                    "Mean luma inside a region of interest (0-255).",
                    &["camera", "roi"],
                ),
                stddev: m.gauges(
                    "edgesight_roi_luma_stddev",
                    "Standard deviation of luma inside a region of interest.",
                    &["camera", "roi"],
                ),
                edges: m.gauges(
                    "edgesight_roi_edge_ratio",
                    "Fraction of a region's pixels that are edges.",
                    &["camera", "roi"],
                ),
                foreground: m.gauges(
                    "edgesight_roi_foreground_ratio",
                    "Fraction of a region's pixels above the Otsu threshold.",
                    &["camera", "roi"],
                ),
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
            health: HealthFamilies::new(m),
            verify: VerifyFamilies::new(m),
            histogram_bins,
        }
    }

    /// The handles one camera's threads update; `target_fps` is the rate its source is set
    /// to, when the config says it. The camera is down until its source says otherwise.
    pub fn camera(&self, name: &str, target_fps: Option<f64>) -> CameraMetrics {
        if let Some(fps) = target_fps {
            self.target_rate.with_label_values(&[name]).set(fps);
        }
        // The series of a stage nobody runs stay out of the scrape: the decode histogram
        // and a target rate only a driver can tell appear once there is something in them.
        let stage_family = self.stage.clone();
        let decode_series = {
            let name = name.to_string();
            move || stage_family.with_label_values(&[&name, DECODE_STAGE])
        };
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
            stage_errors: Stage::ALL
                .map(|s| self.stage_errors.with_label_values(&[name, s.name()])),
            stages: Stage::ALL.map(|s| self.stage.with_label_values(&[name, s.name()])),
            pipeline: self.stage.with_label_values(&[name, PIPELINE_STAGE]),
            decode: LazySeries::new(decode_series),
            target_rate: self.target_rate.clone(),
            latency: self.latency.with_label_values(l),
            frame_rate: self.frame_rate.with_label_values(l),
            otsu: self.otsu.with_label_values(l),
            mean_luma: self.mean_luma.with_label_values(l),
            luma_stddev: self.luma_stddev.with_label_values(l),
            foreground: self.foreground.with_label_values(l),
            edges: self.edges.with_label_values(l),
            motion: self.motion.with_label_values(l),
            histogram: (0..self.histogram_bins)
                .map(|b| {
                    let low = (b * (256 / self.histogram_bins)).to_string();
                    self.histogram.with_label_values(&[name, &low])
                })
                .collect(),
            roi: Mutex::new(RoiSeries {
                families: self.roi.clone(),
                regions: Vec::new(),
            }),
            last_capture: Mutex::new(CaptureStats::default()),
            health: self.health.camera(name),
            verify: self.verify.camera(name),
        }
    }
}

#[derive(Clone)]
struct RoiFamilies {
    mean: GaugeVec,
    stddev: GaugeVec,
    edges: GaugeVec,
    foreground: GaugeVec,
    motion: GaugeVec,
    events: IntCounterVec,
}

/// One region's series, resolved once.
struct RoiGauges {
    name: String,
    mean: Gauge,
    stddev: Gauge,
    edges: Gauge,
    foreground: Gauge,
    motion: Gauge,
    events: IntCounter,
}

/// The series of the regions a camera exports now, resolved when its regions change (the
/// first frame after a reload), so that a frame with the same regions as the last one
/// sets plain atomics, with no label lookup and no allocation.
struct RoiSeries {
    families: RoiFamilies,
    regions: Vec<RoiGauges>,
}

impl RoiSeries {
    fn holds(&self, regions: &[(Region, RegionStats)]) -> bool {
        self.regions.len() == regions.len()
            && self
                .regions
                .iter()
                .zip(regions)
                .all(|(held, (r, _))| held.name == r.name)
    }

    /// Resolves the series of `regions`; those of regions gone vanish from the export.
    fn resolve(&mut self, camera: &str, regions: &[(Region, RegionStats)]) {
        let f = &self.families;
        for gone in &self.regions {
            if regions.iter().any(|(r, _)| r.name == gone.name) {
                continue;
            }
            let labels = [camera, gone.name.as_str()];
            for family in [&f.mean, &f.stddev, &f.edges, &f.foreground, &f.motion] {
                // Absent already is fine: the aim is only that it is absent.
                let _ = family.remove_label_values(&labels);
            }
            let _ = f.events.remove_label_values(&labels);
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
                    motion: f.motion.with_label_values(&labels),
                    events: f.events.with_label_values(&labels),
                }
            })
            .collect();
    }
}

/// The stage label of the host's JPEG decoding in `edgesight_stage_duration_seconds`.
pub const DECODE_STAGE: &str = "decode";

/// A series made on first use (so that it is absent from the scrape until then), then
/// kept: one lookup in its family, once.
pub struct LazySeries<T> {
    series: OnceLock<T>,
    make: Box<dyn Fn() -> T + Send + Sync>,
}

impl<T> LazySeries<T> {
    fn new(make: impl Fn() -> T + Send + Sync + 'static) -> LazySeries<T> {
        LazySeries {
            series: OnceLock::new(),
            make: Box::new(make),
        }
    }

    fn get(&self) -> &T {
        self.series.get_or_init(|| (self.make)())
    }
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
    pipeline_errors: IntCounter,
    stage_errors: [IntCounter; Stage::ALL.len()],
    stages: [Histogram; Stage::ALL.len()],
    /// The sum of a timed frame's stage times.
    pipeline: Histogram,
    /// The host time of decoding JPEG frames, made on the first decoded frame.
    decode: LazySeries<Histogram>,
    target_rate: GaugeVec,
    latency: Histogram,
    pub frame_rate: Gauge,
    otsu: IntGauge,
    mean_luma: Gauge,
    luma_stddev: Gauge,
    foreground: Gauge,
    edges: Gauge,
    motion: Gauge,
    histogram: Vec<Gauge>,
    roi: Mutex<RoiSeries>,
    pub health: HealthMetrics,
    /// Live frames checked against the reference (`[opencl] verify_every`).
    pub verify: Arc<VerifyMetrics>,
    last_capture: Mutex<CaptureStats>,
}

impl CameraMetrics {
    pub fn set_up(&self, up: bool) {
        self.up.set(i64::from(up));
    }

    /// Names the OpenCL device the camera runs on (once it was opened on one) and where
    /// its stage times come from.
    pub fn set_device(&self, device: &ClDeviceInfo, timing: Timing) {
        self.device_info
            .with_label_values(&[
                &device.platform,
                &device.name,
                &device.version,
                timing.name(),
            ])
            .set(1);
    }

    /// Counts a frame the pipeline failed on, and the stage that failed where the error
    /// names one.
    pub fn pipeline_error(&self, error: &PipelineError) {
        self.pipeline_errors.inc();
        if let PipelineError::Stage { stage, .. } | PipelineError::Implausible { stage, .. } = error
        {
            if let Some(i) = Stage::ALL.iter().position(|s| s.name() == *stage) {
                self.stage_errors[i].inc();
            }
        }
    }

    /// The frame rate and drop counts as exported now, for the camera's `Latest`: read
    /// from the series themselves, so the mailbox never counts apart from `/metrics`.
    pub fn activity(&self) -> Activity {
        Activity {
            fps: self.frame_rate.get(),
            dropped: self.capture_dropped.each_ref().map(|c| c.get()),
            backlog: self.backlog_dropped.get(),
        }
    }

    /// A newly opened source counts from zero again: the differences start over, so a
    /// camera restarted after a failure keeps adding to its counters.
    pub fn new_source(&self) {
        if let Ok(mut last) = self.last_capture.lock() {
            *last = CaptureStats::default();
        }
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

    /// Sets the rate the source delivers at, as its driver reports it (for a camera whose
    /// config names none).
    pub fn set_target_rate(&self, fps: f64) {
        self.target_rate.with_label_values(&[&self.name]).set(fps);
    }

    /// Copies one frame's results in; `latency` is capture to now, `decoded` the host time
    /// its JPEG took to decode.
    pub fn frame(&self, result: &FrameResult, latency: Duration, decoded: Option<Duration>) {
        self.frames.inc();
        if result.timed {
            let mut total = 0;
            for (stage, ns) in result.timings.iter() {
                self.stages[stage as usize].observe(ns as f64 / 1e9);
                total += ns;
            }
            self.pipeline.observe(total as f64 / 1e9);
        }
        if let Some(time) = decoded {
            self.decode.get().observe(time.as_secs_f64());
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
        let Ok(mut roi) = self.roi.lock() else {
            return;
        };
        if !roi.holds(&result.regions) {
            roi.resolve(&self.name, &result.regions);
        }
        for (series, (_, stats)) in roi.regions.iter().zip(&result.regions) {
            series.mean.set(stats.mean());
            series.stddev.set(stats.stddev());
            series.edges.set(stats.edge_ratio());
            series.foreground.set(stats.foreground_ratio());
        }
    }

    /// Sets the motion series from the frame's `report` (after [`CameraMetrics::frame`],
    /// which resolves the regions' series) and counts the events that `began`.
    pub fn motion(&self, report: &MotionReport, began: impl Iterator<Item = usize>) {
        self.motion.set(report.ratio);
        let Ok(roi) = self.roi.lock() else {
            return;
        };
        for (series, region) in roi.regions.iter().zip(&report.regions) {
            series.motion.set(region.ratio);
        }
        for i in began {
            if let Some(series) = roi.regions.get(i) {
                series.events.inc();
            }
        }
    }
}

/// What `edgesight_frame_rate` measures: the frames published in the last
/// [`FrameRate::WINDOW`] divided by that window's length, up to now. A rate taken from
/// the intervals between the last frames reads a burst's pace: a camera that delivers
/// three frames a tenth of a second apart every fifteen seconds runs at 0.2 fps, not 10.
/// The window ends now, not at the last frame, so a stalled camera's rate falls, to 0
/// one window after its last frame. Before a window has passed since the first frame,
/// the window starts at that frame (which is then not counted: a rate needs the interval
/// before a frame), so a steady camera reads its rate from its second frame on.
///
/// Its times are kept in memory taken once, for a window at the fastest rate it is
/// measured at in full: a rate that rises (a camera out of low light, a publisher
/// catching up) allocates nothing. Above that rate the window starts at the newest
/// frame the memory let go of, so it holds the frames kept.
pub(crate) struct FrameRate {
    /// The frames counted, oldest first.
    times: VecDeque<Instant>,
    /// Where the window may start at the earliest: the first frame, then the newest frame
    /// let go of for memory.
    since: Option<Instant>,
}

impl FrameRate {
    /// Long enough to hold frames of a slow camera, and bursts of frames with the pauses
    /// between them; a bursty camera's reading is exact when its period divides it.
    pub(crate) const WINDOW: Duration = Duration::from_secs(30);
    /// The times kept: a window at [`MAX_FPS`] would need fifteen times as many, and
    /// two thousand frames measure a rate well enough.
    const KEPT: usize = 2 * MAX_FPS as usize;

    pub(crate) fn new() -> FrameRate {
        FrameRate {
            times: VecDeque::with_capacity(Self::KEPT),
            since: None,
        }
    }

    /// Counts a frame published at `at`.
    pub(crate) fn frame(&mut self, at: Instant) {
        if self.since.is_none() {
            self.since = Some(at);
            return;
        }
        if self.times.len() == Self::KEPT {
            let oldest = self.times.pop_front();
            self.since = self.since.max(oldest);
        }
        self.times.push_back(at);
    }

    /// The rate at `now`: the frames after the window's start, over the time from it to
    /// `now`; 0 before a second frame.
    pub(crate) fn at(&mut self, now: Instant) -> f64 {
        let Some(since) = self.since else {
            return 0.0;
        };
        let start = now
            .checked_sub(Self::WINDOW)
            .map_or(since, |window| window.max(since));
        while self.times.front().is_some_and(|&t| t <= start) {
            self.times.pop_front();
        }
        let span = now.saturating_duration_since(start);
        if span.is_zero() {
            return 0.0;
        }
        self.times.len() as f64 / span.as_secs_f64()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cl::ClError;

    #[test]
    fn a_failed_stage_is_counted_by_its_name_and_in_the_pipeline_errors() {
        let metrics = Metrics::new();
        let m = CameraFamilies::new(&metrics, 16).camera("c", None);
        m.pipeline_error(&PipelineError::Stage {
            stage: Stage::Sobel.name(),
            source: ClError::NoPlatform,
        });
        // An error of no stage in particular counts only in the pipeline's.
        m.pipeline_error(&PipelineError::SlotTooSmall {
            have: 1,
            need: 2,
            layout: "grey 1x2".into(),
        });
        let stage = |s: &str| {
            metrics.sample(&format!(
                r#"edgesight_stage_errors_total{{camera="c",stage="{s}"}}"#
            ))
        };
        assert_eq!(stage("sobel"), Some(1.0));
        assert_eq!(stage("luma"), Some(0.0));
        assert_eq!(
            metrics.sample(r#"edgesight_pipeline_errors_total{camera="c"}"#),
            Some(2.0)
        );
    }

    /// Only timed frames add to the stage-time histograms: an untimed one carries the last
    /// timed frame's times, which would be counted twice.
    #[test]
    fn stage_times_are_observed_only_from_timed_frames() {
        let metrics = Metrics::new();
        let m = CameraFamilies::new(&metrics, 16).camera("c", None);
        let mut result = FrameResult::empty();
        result.timings.0[Stage::Sobel as usize] = 70_000;
        result.timings.0[Stage::Luma as usize] = 30_000;
        let sobel = |what: &str| {
            metrics.sample(&format!(
                r#"edgesight_stage_duration_seconds_{what}{{camera="c",stage="sobel"}}"#
            ))
        };
        for timed in [true, false, false, true, false] {
            result.timed = timed;
            m.frame(&result, Duration::ZERO, None);
        }
        assert_eq!(sobel("count"), Some(2.0));
        assert_eq!(sobel("sum"), Some(2.0 * 70e-6));
        // The pipeline's is the sum of a timed frame's stages.
        let pipeline = |what: &str| {
            metrics.sample(&format!(
                r#"edgesight_stage_duration_seconds_{what}{{camera="c",stage="pipeline"}}"#
            ))
        };
        assert_eq!(pipeline("count"), Some(2.0));
        assert_eq!(pipeline("sum"), Some(2.0 * 100e-6));
        assert_eq!(
            metrics.sample(r#"edgesight_frames_total{camera="c"}"#),
            Some(5.0)
        );
    }

    /// Cameras on one OpenCL device name it once.
    #[test]
    fn the_device_info_is_one_series_a_device() {
        let metrics = Metrics::new();
        let families = CameraFamilies::new(&metrics, 16);
        let device = |name: &str| ClDeviceInfo {
            platform: "p".into(),
            platform_version: "1".into(),
            name: name.into(),
            vendor: "v".into(),
            kind: "GPU",
            version: "OpenCL 3.0".into(),
            driver_version: "1".into(),
            opencl_c_version: "OpenCL C 1.2".into(),
            compute_units: 1,
            local_mem_bytes: 1,
            global_mem_bytes: 1,
            max_work_group_size: 1,
            unified_memory: None,
            fp64: false,
        };
        for camera in ["a", "b", "c"] {
            families
                .camera(camera, None)
                .set_device(&device("gpu"), Timing::Device);
        }
        families
            .camera("d", None)
            .set_device(&device("cpu"), Timing::Host);
        let text = String::from_utf8(metrics.encode()).expect("UTF-8");
        let lines: Vec<&str> = text
            .lines()
            .filter(|l| l.starts_with("edgesight_opencl_device_info{"))
            .collect();
        assert_eq!(
            lines,
            [
                r#"edgesight_opencl_device_info{device="cpu",platform="p",timing="host",version="OpenCL 3.0"} 1"#,
                r#"edgesight_opencl_device_info{device="gpu",platform="p",timing="device",version="OpenCL 3.0"} 1"#,
            ]
        );
    }

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
        let m = CameraFamilies::new(&metrics, 16).camera("c", None);
        let mean = |roi: &str| {
            metrics.sample(&format!(
                r#"edgesight_roi_mean_luma{{camera="c",roi="{roi}"}}"#
            ))
        };
        let mut result = FrameResult::empty();
        result.regions = vec![region("a", 10), region("b", 20)];
        m.frame(&result, Duration::ZERO, None);
        assert_eq!((mean("a"), mean("b")), (Some(10.0), Some(20.0)));
        // The same regions again: the held series take the new values.
        result.regions = vec![region("a", 11), region("b", 21)];
        m.frame(&result, Duration::ZERO, None);
        assert_eq!((mean("a"), mean("b")), (Some(11.0), Some(21.0)));
        // A reload: `a` goes, `c` comes, `b` stays, now second.
        result.regions = vec![region("c", 30), region("b", 22)];
        m.frame(&result, Duration::ZERO, None);
        assert_eq!(mean("a"), None);
        assert_eq!((mean("b"), mean("c")), (Some(22.0), Some(30.0)));
        result.regions.clear();
        m.frame(&result, Duration::ZERO, None);
        assert_eq!((mean("b"), mean("c")), (None, None));
    }

    /// A steady camera reads its rate from its second frame on, before a window has
    /// passed and after.
    #[test]
    fn the_frame_rate_of_a_steady_camera_is_its_rate_from_the_second_frame() {
        let t0 = Instant::now();
        let ms = |n: u64| t0 + Duration::from_millis(n);
        let mut rate = FrameRate::new();
        assert_eq!(rate.at(t0), 0.0);
        rate.frame(ms(0));
        assert_eq!(rate.at(ms(0)), 0.0, "one frame is no rate");
        assert_eq!(rate.at(ms(100)), 0.0, "one frame is no rate");
        for n in 1..=200 {
            rate.frame(ms(250 * n));
            assert_eq!(rate.at(ms(250 * n)), 4.0, "frame {n}");
        }
        // Between frames: a full window holds as many frames as ever; in the first one
        // the time since the last frame counts.
        assert_eq!(rate.at(ms(50_125)), 4.0);
        let mut rate = FrameRate::new();
        for n in 0..=4 {
            rate.frame(ms(250 * n));
        }
        assert_eq!(rate.at(ms(1125)), 4.0 / 1.125);
    }

    /// Issue 46, finding 11: a camera delivering 0.2 fps in bursts read 12-15 fps, the
    /// pace within a burst. Three frames 100 ms apart every 15 s read 0.2 fps at every
    /// moment once a window has passed.
    #[test]
    fn round3_11_bursts_read_as_their_average_rate() {
        let t0 = Instant::now();
        let ms = |n: u64| t0 + Duration::from_millis(n);
        let mut rate = FrameRate::new();
        let mut due: Vec<u64> = (0..=12)
            .flat_map(|k| [0, 100, 200].map(|d| 15_000 * k + d))
            .rev()
            .collect();
        for now in (0..=180_000).step_by(50) {
            while due.last().is_some_and(|&t| t <= now) {
                rate.frame(ms(due.pop().unwrap()));
            }
            let fps = rate.at(ms(now));
            match now {
                // The first burst, before a window has passed, is all there is.
                200 => assert_eq!(fps, 10.0),
                15_200 => assert_eq!(fps, 5.0 / 15.2),
                30_200.. => assert_eq!(fps, 0.2, "at {now} ms"),
                _ => assert!(fps <= 10.0, "at {now} ms: {fps}"),
            }
        }
    }

    /// Issue 46, finding 11: a camera that stops falls towards 0 as the window moves
    /// past its last frames, and reads 0 one window after the last.
    #[test]
    fn round3_11_a_stalled_camera_falls_to_zero_within_a_window() {
        let t0 = Instant::now();
        let ms = |n: u64| t0 + Duration::from_millis(n);
        let mut rate = FrameRate::new();
        // 4 fps for a minute, then nothing.
        for n in 0..=240 {
            rate.frame(ms(250 * n));
        }
        assert_eq!(rate.at(ms(60_000)), 4.0);
        assert_eq!(rate.at(ms(67_500)), 3.0);
        assert_eq!(rate.at(ms(75_000)), 2.0);
        assert_eq!(rate.at(ms(89_999)), 1.0 / 30.0);
        assert_eq!(rate.at(ms(90_000)), 0.0);
        assert_eq!(rate.at(ms(900_000)), 0.0);
        // Frames again: the window holds them, and the stall before them.
        rate.frame(ms(900_250));
        assert_eq!(rate.at(ms(900_250)), 1.0 / 30.0);
    }

    /// A rate above any source's (a burst) keeps the memory the window was given and
    /// is measured over the span the kept times cover.
    #[test]
    fn the_frame_rate_keeps_its_memory_at_any_rate() {
        let t0 = Instant::now();
        let mut rate = FrameRate::new();
        let capacity = rate.times.capacity();
        // 4000 fps for a second: more frames than a window keeps.
        for n in 0..4000u64 {
            rate.frame(t0 + Duration::from_micros(250 * n));
        }
        assert_eq!(rate.times.capacity(), capacity);
        assert_eq!(rate.times.len(), FrameRate::KEPT);
        let fps = rate.at(t0 + Duration::from_micros(250 * 3999));
        assert!((fps - 4000.0).abs() < 1e-6, "{fps}");
    }

    /// What `/api/v1/latest` and the status page show of a camera's pace is this
    /// `Activity` (the route tests render a made one): it must be what `/metrics` says.
    #[test]
    fn activity_reads_the_exported_rate_and_drops() {
        let metrics = Metrics::new();
        let m = CameraFamilies::new(&metrics, 16).camera("c", None);
        let mut stats = CaptureStats::default();
        stats.dropped[DropReason::ShortFrame as usize] = 4;
        stats.dropped[DropReason::SequenceGap as usize] = 1;
        m.capture(true, &stats);
        m.backlog_dropped.inc_by(2);
        m.frame_rate.set(12.5);
        let a = m.activity();
        assert_eq!(a.fps, 12.5);
        assert_eq!(
            metrics.sample(r#"edgesight_frame_rate{camera="c"}"#),
            Some(a.fps)
        );
        assert_eq!(a.dropped_total(), 7);
        let by_reason: Vec<(&str, u64)> = a.dropped_by_reason().collect();
        assert_eq!(
            by_reason,
            [
                ("sequence_gap", 1),
                ("buffer_error", 0),
                ("short_frame", 4),
                ("bad_image", 0),
                ("corrupt_frame", 0),
                ("publish_backlog", 2)
            ]
        );
        for (reason, n) in by_reason {
            let series =
                format!(r#"edgesight_frames_dropped_total{{camera="c",reason="{reason}"}}"#);
            assert_eq!(metrics.sample(&series), Some(n as f64), "{reason}");
        }
    }

    #[test]
    fn a_restarted_source_keeps_adding_to_the_counters() {
        let metrics = Metrics::new();
        let m = CameraFamilies::new(&metrics, 16).camera("c", None);
        let mut stats = CaptureStats {
            reconnects: 2,
            ..CaptureStats::default()
        };
        stats.dropped[DropReason::ShortFrame as usize] = 5;
        m.capture(true, &stats);
        // The camera failed and was opened again: its new source counts from zero.
        m.new_source();
        let mut again = CaptureStats {
            reconnects: 1,
            ..CaptureStats::default()
        };
        again.dropped[DropReason::ShortFrame as usize] = 2;
        m.capture(true, &again);
        let sample = |s: &str| metrics.sample(s);
        assert_eq!(
            sample(r#"edgesight_frames_dropped_total{camera="c",reason="short_frame"}"#),
            Some(7.0)
        );
        assert_eq!(
            sample(r#"edgesight_camera_reconnects_total{camera="c"}"#),
            Some(3.0)
        );
    }
}
