//! The capture collector: whether the camera delivers (`edgesight_camera_up`), the frames
//! it lost (`edgesight_frames_dropped_total`), its reconnects and restarts
//! (`edgesight_camera_reconnects_total`, `edgesight_camera_restarts_total`), the rate its
//! source is set to (`edgesight_target_frame_rate`) and the rate its frames are published
//! at (`edgesight_frame_rate`, as [`FrameRate`] measures it). The capture/GPU thread copies
//! its source's totals in, the publisher sets the rate, and the camera's [`Activity`] is
//! read back from these series.

use std::collections::VecDeque;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use prometheus::{Gauge, GaugeVec, IntCounter, IntCounterVec, IntGauge, IntGaugeVec};

use edgesight_capture::capture::{CaptureStats, MAX_FPS};
use edgesight_frame::frame::DropReason;
use edgesight_http::mailbox::{Activity, DROP_PUBLISH_BACKLOG};
use edgesight_http::metrics::Metrics;

pub(super) struct CaptureFamilies {
    camera_up: IntGaugeVec,
    dropped: IntCounterVec,
    reconnects: IntCounterVec,
    restarts: IntCounterVec,
    frame_rate: GaugeVec,
    target_rate: GaugeVec,
}

impl CaptureFamilies {
    pub(super) fn new(m: &Metrics) -> CaptureFamilies {
        let cam = &["camera"];
        CaptureFamilies {
            camera_up: m.int_gauges(
                "edgesight_camera_up",
                "1 while the camera can deliver frames, 0 while it is gone.",
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
        }
    }

    /// One camera's series; `target_fps` is the rate its source is set to, when the
    /// config says it. The camera is down until its source says otherwise.
    pub(super) fn camera(&self, name: &str, target_fps: Option<f64>) -> CaptureMetrics {
        // A target rate only a driver can tell appears once the driver has told it.
        if let Some(fps) = target_fps {
            self.target_rate.with_label_values(&[name]).set(fps);
        }
        let l = &[name];
        let dropped = |reason: &str| self.dropped.with_label_values(&[name, reason]);
        CaptureMetrics {
            name: name.to_string(),
            up: self.camera_up.with_label_values(l),
            capture_dropped: DropReason::ALL.map(|r| dropped(r.name())),
            backlog_dropped: dropped(DROP_PUBLISH_BACKLOG),
            reconnects: self.reconnects.with_label_values(l),
            restarts: self.restarts.with_label_values(l),
            frame_rate: self.frame_rate.with_label_values(l),
            target_rate: self.target_rate.clone(),
            last: Mutex::new(CaptureStats::default()),
        }
    }
}

/// One camera's capture series.
pub(super) struct CaptureMetrics {
    name: String,
    up: IntGauge,
    capture_dropped: [IntCounter; DropReason::ALL.len()],
    pub(super) backlog_dropped: IntCounter,
    reconnects: IntCounter,
    pub(super) restarts: IntCounter,
    pub(super) frame_rate: Gauge,
    target_rate: GaugeVec,
    /// The source's totals as last copied in: the counters grow by the difference.
    last: Mutex<CaptureStats>,
}

impl CaptureMetrics {
    pub(super) fn set_up(&self, up: bool) {
        self.up.set(i64::from(up));
    }

    /// The frame rate and drop counts as exported now, for the camera's `Latest`: read
    /// from the series themselves, so the mailbox never counts apart from `/metrics`.
    pub(super) fn activity(&self) -> Activity {
        Activity {
            fps: self.frame_rate.get(),
            dropped: self.capture_dropped.each_ref().map(|c| c.get()),
            backlog: self.backlog_dropped.get(),
        }
    }

    /// A newly opened source counts from zero again: the differences start over, so a
    /// camera restarted after a failure keeps adding to its counters.
    pub(super) fn new_source(&self) {
        if let Ok(mut last) = self.last.lock() {
            *last = CaptureStats::default();
        }
    }

    /// Copies a source's running totals in (counters grow by the difference).
    pub(super) fn update(&self, up: bool, stats: &CaptureStats) {
        self.set_up(up);
        let Ok(mut last) = self.last.lock() else {
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
    pub(super) fn set_target_rate(&self, fps: f64) {
        self.target_rate.with_label_values(&[&self.name]).set(fps);
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
        let m = CaptureFamilies::new(&metrics).camera("c", None);
        let mut stats = CaptureStats::default();
        stats.dropped[DropReason::ShortFrame as usize] = 4;
        stats.dropped[DropReason::SequenceGap as usize] = 1;
        m.update(true, &stats);
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
        let m = CaptureFamilies::new(&metrics).camera("c", None);
        let mut stats = CaptureStats {
            reconnects: 2,
            ..CaptureStats::default()
        };
        stats.dropped[DropReason::ShortFrame as usize] = 5;
        m.update(true, &stats);
        // The camera failed and was opened again: its new source counts from zero.
        m.new_source();
        let mut again = CaptureStats {
            reconnects: 1,
            ..CaptureStats::default()
        };
        again.dropped[DropReason::ShortFrame as usize] = 2;
        m.update(true, &again);
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
