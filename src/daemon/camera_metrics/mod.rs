//! A camera's families, one collector a concern, each in a file that declares its
//! families beside the code that sets them: `capture` (up, drops, reconnects and
//! restarts, the target and measured frame rates), `frame` (the frame's results and
//! latency), `stages` (the OpenCL device, stage times and errors), `regions` (the
//! regions' numbers and the lifecycle of every per-region series), `motion`, `health`
//! (tamper detection), and the live-frame checks' in `daemon::verify`, beside the
//! verifier. [`CameraMetrics`] composes one camera's: the capture/GPU thread fills the
//! capture counters and stage errors, and the publisher copies each [`FrameResult`] in;
//! stages never touch the registry.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use super::verify::{VerifyFamilies, VerifyMetrics};
use capture::{CaptureFamilies, CaptureMetrics};
use edgesight_capture::capture::CaptureStats;
use edgesight_core::cl::{ClDeviceInfo, Timing};
use edgesight_core::motion_events::MotionReport;
use edgesight_core::pipeline::{FrameResult, PipelineError};
use edgesight_http::mailbox::Activity;
use edgesight_http::metrics::Metrics;
use frame::{FrameFamilies, FrameMetrics};
use health::{HealthFamilies, HealthMetrics};
use motion::{MotionFamilies, MotionMetrics};
use regions::{RegionFamilies, RegionSeries};
use stages::{StageFamilies, StageMetrics};

pub(crate) use capture::FrameRate;
pub use stages::TIMED_FRAMES;

mod capture;
mod frame;
pub mod health;
mod motion;
mod regions;
mod stages;

/// The per-camera families; one [`CameraMetrics`] per camera hangs off them.
pub struct CameraFamilies {
    capture: CaptureFamilies,
    stages: StageFamilies,
    frame: FrameFamilies,
    regions: RegionFamilies,
    motion: MotionFamilies,
    health: HealthFamilies,
    verify: VerifyFamilies,
}

impl CameraFamilies {
    /// Registers the camera families in `metrics`; `histogram_bins` (a power of two up
    /// to 256) is how many buckets the exported luma histogram has.
    pub fn new(metrics: &Metrics, histogram_bins: u32) -> CameraFamilies {
        let motion = MotionFamilies::new(metrics);
        CameraFamilies {
            capture: CaptureFamilies::new(metrics),
            stages: StageFamilies::new(metrics),
            frame: FrameFamilies::new(metrics, histogram_bins),
            regions: RegionFamilies::new(metrics, motion.regions.clone()),
            motion,
            health: HealthFamilies::new(metrics),
            verify: VerifyFamilies::new(metrics),
        }
    }

    /// The handles one camera's threads update; `target_fps` is the rate its source is set
    /// to, when the config says it. The camera is down until its source says otherwise.
    pub fn camera(&self, name: &str, target_fps: Option<f64>) -> CameraMetrics {
        CameraMetrics {
            name: name.to_string(),
            capture: self.capture.camera(name, target_fps),
            stages: self.stages.camera(name),
            frame: self.frame.camera(name),
            regions: Mutex::new(self.regions.camera(name)),
            motion: self.motion.camera(name),
            health: self.health.camera(name),
            verify: self.verify.camera(name),
        }
    }
}

/// One camera's series, resolved once so that updates are plain atomics.
pub struct CameraMetrics {
    pub name: String,
    capture: CaptureMetrics,
    stages: StageMetrics,
    frame: FrameMetrics,
    /// Resolved again when the regions change: a reload's, on its first frame.
    regions: Mutex<RegionSeries>,
    motion: MotionMetrics,
    pub health: HealthMetrics,
    /// Live frames checked against the reference (`[opencl] verify_every`).
    pub verify: Arc<VerifyMetrics>,
}

impl CameraMetrics {
    pub fn set_up(&self, up: bool) {
        self.capture.set_up(up);
    }

    /// Copies a source's running totals in (counters grow by the difference).
    pub fn capture(&self, up: bool, stats: &CaptureStats) {
        self.capture.update(up, stats);
    }

    /// A newly opened source counts from zero again: the differences start over, so a
    /// camera restarted after a failure keeps adding to its counters.
    pub fn new_source(&self) {
        self.capture.new_source();
    }

    /// Counts the camera opened again after a failure.
    pub fn restarted(&self) {
        self.capture.restarts.inc();
    }

    /// Counts `n` frames lost because the publisher fell behind.
    pub fn backlog_dropped(&self, n: u64) {
        self.capture.backlog_dropped.inc_by(n);
    }

    /// Sets the rate the source delivers at, as its driver reports it (for a camera whose
    /// config names none).
    pub fn set_target_rate(&self, fps: f64) {
        self.capture.set_target_rate(fps);
    }

    /// Sets the rate frames are published at ([`FrameRate`]).
    pub fn set_frame_rate(&self, fps: f64) {
        self.capture.frame_rate.set(fps);
    }

    /// The frame rate and drop counts as exported now, for the camera's `Latest`.
    pub fn activity(&self) -> Activity {
        self.capture.activity()
    }

    /// Names the OpenCL device the camera runs on (once it was opened on one) and where
    /// its stage times come from.
    pub fn set_device(&self, device: &ClDeviceInfo, timing: Timing) {
        self.stages.set_device(device, timing);
    }

    /// Counts a frame the pipeline failed on, and the stage that failed where the error
    /// names one.
    pub fn pipeline_error(&self, error: &PipelineError) {
        self.stages.error(error);
    }

    /// Copies one frame's results in; `latency` is capture to now, `decoded` the host time
    /// its JPEG took to decode.
    pub fn frame(&self, result: &FrameResult, latency: Duration, decoded: Option<Duration>) {
        self.frame.set(result, latency);
        self.stages.frame(result, decoded);
        if let Ok(mut regions) = self.regions.lock() {
            regions.set(&result.regions);
        }
    }

    /// Sets the motion series from the frame's `report` (after [`CameraMetrics::frame`],
    /// which resolves the regions' series) and counts the events that `began`.
    pub fn motion(&self, report: &MotionReport, began: impl Iterator<Item = usize>) {
        let regions = self.regions.lock();
        let series = regions.as_deref().map_or(&[][..], RegionSeries::motion);
        self.motion.set(report, series, began);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use edgesight_core::pipeline::Stage;

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
}
