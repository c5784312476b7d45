//! The stage collector: the OpenCL device a camera's pipeline runs on
//! (`edgesight_opencl_device_info`), the frames it failed on
//! (`edgesight_pipeline_errors_total`, and by stage `edgesight_stage_errors_total`) and its
//! stages' times (`edgesight_stage_duration_seconds`: each stage, the pipeline's sum, and
//! the host's JPEG decoding). The capture/GPU thread names the device and counts the
//! errors; the publisher observes the times a frame carries.

use std::sync::OnceLock;
use std::time::Duration;

use prometheus::{Histogram, HistogramVec, IntCounter, IntCounterVec, IntGaugeVec};

use edgesight_core::cl::{ClDeviceInfo, Timing};
use edgesight_core::pipeline::{FrameResult, PipelineError, Stage};
use edgesight_http::metrics::Metrics;

/// The stage times are measured on one frame in this many: a few samples a second give
/// the duration histograms their shape, and an untimed frame asks the driver for no
/// events ([`edgesight_core::pipeline::Pipeline::time_every`]).
pub const TIMED_FRAMES: u64 = 8;

/// Device time buckets: 50 µs to 250 ms, for stages from a GPU's fraction of a millisecond
/// to a slow CPU driver's tens of milliseconds.
const STAGE_BUCKETS: [f64; 12] = [
    0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25,
];

/// The stage label of the sum of a timed frame's stage times, the one series of
/// `edgesight_stage_duration_seconds` the default tier keeps (its sum and count).
const PIPELINE_STAGE: &str = "pipeline";
/// The stage label of the host's JPEG decoding in `edgesight_stage_duration_seconds`.
const DECODE_STAGE: &str = "decode";

pub(super) struct StageFamilies {
    device_info: IntGaugeVec,
    pipeline_errors: IntCounterVec,
    stage_errors: IntCounterVec,
    stage: HistogramVec,
}

impl StageFamilies {
    pub(super) fn new(m: &Metrics) -> StageFamilies {
        let cam = &["camera"];
        StageFamilies {
            device_info: m.int_gauges(
                "edgesight_opencl_device_info",
                "Always 1, once for each OpenCL device a camera's pipeline runs on; timing says whose clock the stage times are on: device (profiling events) or host (the driver gives no profiling queue).",
                &["platform", "device", "version", "timing"],
            ),
            pipeline_errors: m.counters(
                "edgesight_pipeline_errors_total",
                "Frames the OpenCL pipeline failed on.",
                cam,
            ),
            stage_errors: m.detail_only(m.counters(
                "edgesight_stage_errors_total",
                "Frames a pipeline stage failed on, by stage (a part of edgesight_pipeline_errors_total).",
                &["camera", "stage"],
            )),
            // The slowdown alert and the stage-time panel read the pipeline's sum and count.
            stage: m.summed_in_default(m.histograms(
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
            ), "stage", PIPELINE_STAGE),
        }
    }

    /// One camera's series.
    pub(super) fn camera(&self, name: &str) -> StageMetrics {
        // The decode histogram of a source that delivers no JPEG stays out of the scrape:
        // it appears with the first decoded frame.
        let stage_family = self.stage.clone();
        let decode_series = {
            let name = name.to_string();
            move || stage_family.with_label_values(&[&name, DECODE_STAGE])
        };
        StageMetrics {
            device_info: self.device_info.clone(),
            pipeline_errors: self.pipeline_errors.with_label_values(&[name]),
            stage_errors: Stage::ALL
                .map(|s| self.stage_errors.with_label_values(&[name, s.name()])),
            stages: Stage::ALL.map(|s| self.stage.with_label_values(&[name, s.name()])),
            pipeline: self.stage.with_label_values(&[name, PIPELINE_STAGE]),
            decode: LazySeries::new(decode_series),
        }
    }
}

/// A series made on first use (so that it is absent from the scrape until then), then
/// kept: one lookup in its family, once.
struct LazySeries<T> {
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

/// One camera's stage series.
pub(super) struct StageMetrics {
    device_info: IntGaugeVec,
    pipeline_errors: IntCounter,
    stage_errors: [IntCounter; Stage::ALL.len()],
    stages: [Histogram; Stage::ALL.len()],
    /// The sum of a timed frame's stage times.
    pipeline: Histogram,
    /// The host time of decoding JPEG frames, made on the first decoded frame.
    decode: LazySeries<Histogram>,
}

impl StageMetrics {
    /// Names the OpenCL device the camera runs on (once it was opened on one) and where
    /// its stage times come from.
    pub(super) fn set_device(&self, device: &ClDeviceInfo, timing: Timing) {
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
    pub(super) fn error(&self, error: &PipelineError) {
        self.pipeline_errors.inc();
        if let PipelineError::Stage { stage, .. } | PipelineError::Implausible { stage, .. } = error
        {
            if let Some(i) = Stage::ALL.iter().position(|s| s == stage) {
                self.stage_errors[i].inc();
            }
        }
    }

    /// Observes a frame's stage times, when it was timed, and the host time its JPEG took
    /// to decode.
    pub(super) fn frame(&self, result: &FrameResult, decoded: Option<Duration>) {
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
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use edgesight_core::cl::ClError;

    #[test]
    fn a_failed_stage_is_counted_by_its_name_and_in_the_pipeline_errors() {
        let metrics = Metrics::new();
        let m = StageFamilies::new(&metrics).camera("c");
        m.error(&PipelineError::Stage {
            stage: Stage::Sobel,
            source: ClError::NoPlatform,
        });
        // An error of no stage in particular counts only in the pipeline's.
        m.error(&PipelineError::SlotTooSmall {
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

    /// Cameras on one OpenCL device name it once.
    #[test]
    fn the_device_info_is_one_series_a_device() {
        let metrics = Metrics::new();
        let families = StageFamilies::new(&metrics);
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
                .camera(camera)
                .set_device(&device("gpu"), Timing::Device);
        }
        families
            .camera("d")
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
}
