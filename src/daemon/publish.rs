//! The publisher: one thread per camera that copies each frame's results into the
//! metrics, the health detectors and the latest-frame mailbox the server reads.
//!
//! Once warm it allocates nothing per frame, however the camera and the readers keep up:
//! a `Latest` no reader holds any longer is filled again in place, and the result it held
//! goes back to the camera thread through `spare` to be filled by a later frame.

use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};

use tokio::sync::watch;

use super::camera::Published;
use super::camera_metrics::{CameraMetrics, FrameRate};
use edgesight_core::health::{self, Health, HealthReport, HealthSettings};
use edgesight_core::motion_events::{
    self, CameraMotionSettings, MotionChange, MotionEvents, MotionReport,
};
use edgesight_core::pipeline::FrameResult;
use edgesight_http::mailbox::{Activity, Latest};

/// How long the publisher waits for a frame before it shows the last one again with the
/// camera's newer numbers (the rate falls, drops are counted while no frame comes).
const IDLE: Duration = Duration::from_millis(500);

/// Copies each frame's results into the metrics and the latest-frame slot; ends when the
/// camera thread does.
pub fn publish(
    rx: mpsc::Receiver<Published>,
    spare: mpsc::SyncSender<FrameResult>,
    m: Arc<CameraMetrics>,
    latest: watch::Sender<Option<Arc<Latest>>>,
) {
    let mut rate = FrameRate::new();
    let mut health = Health::new(HealthSettings::default());
    let mut motion = MotionEvents::new(CameraMotionSettings::default());
    let mut began = Vec::with_capacity(16);
    let mut pool = LatestPool::new();
    loop {
        match rx.recv_timeout(IDLE) {
            Ok(p) => {
                let now = Instant::now();
                m.frame(
                    &p.result,
                    now.saturating_duration_since(p.captured),
                    p.decoded,
                );
                let report = watch_health(&mut health, &p, &m);
                watch_motion(&mut motion, &p, report.as_ref(), &m, &mut began);
                rate.frame(now);
                m.set_frame_rate(rate.at(now));
                let fresh = Latest {
                    sequence: p.sequence,
                    published: now,
                    result: p.result,
                    options: p.options,
                    source: p.source,
                    activity: m.activity(),
                    health: report,
                    motion: MotionReport::default(),
                };
                let next = match pool.take_unread() {
                    Some(mut old) => {
                        let slot = Arc::get_mut(&mut old).expect("take_unread: no other holder");
                        // The report's regions go back into the one kept, in its memory.
                        let mut fresh = fresh;
                        std::mem::swap(&mut fresh.motion, &mut slot.motion);
                        fresh.motion.clone_from(motion.report());
                        let done = std::mem::replace(slot, fresh).result;
                        // A full channel means the camera has results enough: this one
                        // is freed, which costs no allocation.
                        let _ = spare.try_send(done);
                        old
                    }
                    None => Arc::new(Latest {
                        motion: motion.report().clone(),
                        ..fresh
                    }),
                };
                pool.keep(latest.send_replace(Some(next)));
            }
            Err(mpsc::RecvTimeoutError::Timeout) => {
                m.set_frame_rate(rate.at(Instant::now()));
                show_again(&latest, &mut pool, m.activity());
            }
            Err(mpsc::RecvTimeoutError::Disconnected) => return,
        }
    }
}

/// The last frame shown again with `activity` (the camera's numbers moved while no frame
/// came), when they differ; copied into a `Latest` no reader holds where there is one.
fn show_again(
    latest: &watch::Sender<Option<Arc<Latest>>>,
    pool: &mut LatestPool,
    activity: Activity,
) {
    let mut replaced = None;
    latest.send_if_modified(|current| {
        let Some(current) = current else {
            return false;
        };
        if current.activity == activity {
            return false;
        }
        let next = match pool.take_unread() {
            Some(mut old) => {
                let slot = Arc::get_mut(&mut old).expect("take_unread: no other holder");
                slot.copy_from(current);
                slot.activity = activity;
                old
            }
            None => Arc::new(Latest {
                activity,
                ..Latest::clone(current)
            }),
        };
        replaced = Some(std::mem::replace(current, next));
        true
    });
    pool.keep(replaced);
}

/// The `Latest`s the publisher replaced, kept to be filled again once no reader (a
/// request being answered) holds them. A reader that holds one while the next frame
/// comes costs one allocation the first time, and none after: the pool has room for as
/// many as readers hold at once, up to [`LatestPool::ROOM`].
struct LatestPool {
    kept: Vec<Arc<Latest>>,
}

impl LatestPool {
    /// More than the publisher and a few slow readers hold at once; beyond it the oldest
    /// is let go (freed when its reader is done).
    const ROOM: usize = 4;

    fn new() -> LatestPool {
        LatestPool {
            kept: Vec::with_capacity(Self::ROOM),
        }
    }

    /// One that no reader holds, to be filled again in place.
    fn take_unread(&mut self) -> Option<Arc<Latest>> {
        let i = self
            .kept
            .iter_mut()
            .position(|l| Arc::get_mut(l).is_some())?;
        Some(self.kept.swap_remove(i))
    }

    fn keep(&mut self, replaced: Option<Arc<Latest>>) {
        let Some(replaced) = replaced else {
            return;
        };
        if self.kept.len() == Self::ROOM {
            self.kept.remove(0);
        }
        self.kept.push(replaced);
    }
}

/// Runs a frame's motion through its regions' events (nothing moves while the health
/// detectors say the view is lost: moved, covered or out of focus), logs the events that
/// begin and end and sets the motion series. `began` is scratch memory, kept across
/// frames.
fn watch_motion(
    motion: &mut MotionEvents,
    p: &Published,
    health: Option<&HealthReport>,
    m: &CameraMetrics,
    began: &mut Vec<usize>,
) {
    motion.set_settings(p.motion);
    let view_lost = health.and_then(|h| motion_events::view_lost(&h.kinds));
    began.clear();
    motion.update(&p.result, p.captured, view_lost, |change, roi| match change {
        MotionChange::Began(i) => {
            began.push(i);
            tracing::info!(camera = %m.name, roi = %roi, frame = p.sequence, "motion began");
        }
        MotionChange::Ended(_) => {
            tracing::info!(camera = %m.name, roi = %roi, frame = p.sequence, "motion ended");
        }
        MotionChange::Withdrawn => {
            tracing::info!(camera = %m.name, roi = %roi, frame = p.sequence, cause = "reload", "motion ended");
        }
    });
    m.motion(motion.report(), began.iter().copied());
}

/// Runs a frame through the camera's health detectors (when they are on), logs what
/// changed and sets the health series; returns the report for [`Latest`].
fn watch_health(health: &mut Health, p: &Published, m: &CameraMetrics) -> Option<HealthReport> {
    let was_on = health.settings().enabled;
    health.set_settings(p.health);
    if !p.health.enabled {
        if was_on {
            m.health.off();
            tracing::info!(camera = %m.name, frame = p.sequence, "camera health: detectors off");
        }
        return None;
    }
    let name = &m.name;
    for event in health.update(&p.result, p.captured) {
        match *event {
            health::Event::Learned => {
                tracing::info!(camera = %name, frame = p.sequence, "camera health: baseline learned");
            }
            health::Event::Tampered(kind) => {
                m.health.tampered(kind);
                tracing::warn!(camera = %name, kind = %kind, frame = p.sequence, "camera health: tampered");
            }
            health::Event::Cleared(kind) => {
                tracing::info!(camera = %name, kind = %kind, frame = p.sequence, "camera health: ok again");
            }
        }
    }
    let report = *health.report();
    m.health.set(&report);
    Some(report)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::daemon::camera_metrics::CameraFamilies;
    use edgesight_capture::capture::CaptureStats;
    use edgesight_core::pipeline::{FrameResult, PipelineOptions};
    use edgesight_frame::frame::DropReason;
    use edgesight_http::mailbox::SourceInfo;
    use edgesight_http::metrics::Metrics;

    fn frame(sequence: u64, source: &Arc<SourceInfo>) -> Published {
        Published {
            result: FrameResult::empty(),
            options: PipelineOptions::default(),
            health: HealthSettings::default(),
            motion: CameraMotionSettings::default(),
            sequence,
            captured: Instant::now(),
            decoded: None,
            source: Arc::clone(source),
        }
    }

    /// Waits (up to a minute, for a loaded machine) until the latest frame satisfies `ok`.
    fn wait_for(latest: &watch::Receiver<Option<Arc<Latest>>>, ok: impl Fn(&Latest) -> bool) {
        let deadline = Instant::now() + Duration::from_secs(60);
        while !latest.borrow().as_deref().is_some_and(&ok) {
            assert!(
                Instant::now() < deadline,
                "the latest frame never got there"
            );
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    #[test]
    fn the_latest_frame_carries_the_exported_frame_rate_and_drops() {
        let metrics = Metrics::new();
        let m = Arc::new(CameraFamilies::new(&metrics, 16).camera("c", Some(30.0)));
        let mut stats = CaptureStats::default();
        stats.dropped[DropReason::SequenceGap as usize] = 3;
        stats.dropped[DropReason::BadImage as usize] = 1;
        m.capture(true, &stats);
        m.backlog_dropped(2);
        let (tx, rx) = mpsc::sync_channel(8);
        let (spare_tx, _spare) = mpsc::sync_channel(8);
        let (latest_tx, latest) = watch::channel(None);
        let publisher = {
            let m = Arc::clone(&m);
            std::thread::spawn(move || publish(rx, spare_tx, m, latest_tx))
        };
        let source = Arc::new(SourceInfo {
            format: "grey",
            device: "none".into(),
        });
        for sequence in 0..3 {
            tx.send(frame(sequence, &source))
                .expect("the publisher runs");
        }
        wait_for(&latest, |l| l.sequence == 2);
        let l = latest.borrow().clone().expect("published");
        assert_eq!(
            (l.activity.dropped, l.activity.backlog),
            ([3, 0, 0, 1, 0], 2)
        );
        assert!(l.activity.fps > 0.0, "three frames, a rate");

        // Drops counted while no frame comes reach the last frame's numbers.
        stats.dropped[DropReason::SequenceGap as usize] = 5;
        m.capture(false, &stats);
        wait_for(&latest, |l| l.activity.dropped[0] == 5);
        // Once the publisher has ended nothing changes: the mailbox and the metrics agree.
        drop(tx);
        publisher.join().expect("no panic");
        let l = latest.borrow().clone().expect("published");
        assert_eq!(l.sequence, 2, "the same frame");
        assert_eq!(l.activity.dropped_total(), 8);
        for (reason, n) in l.activity.dropped_by_reason() {
            let series =
                format!(r#"edgesight_frames_dropped_total{{camera="c",reason="{reason}"}}"#);
            assert_eq!(metrics.sample(&series), Some(n as f64), "{reason}");
        }
        assert_eq!(
            metrics.sample(r#"edgesight_frame_rate{camera="c"}"#),
            Some(l.activity.fps)
        );
    }

    /// Results come back for the camera to fill again, each once, and only those no reader
    /// holds: the one a reader keeps stays its own.
    #[test]
    fn results_the_server_no_longer_reads_go_back_to_the_camera() {
        let metrics = Metrics::new();
        let m = Arc::new(CameraFamilies::new(&metrics, 16).camera("c", None));
        let (tx, rx) = mpsc::sync_channel(8);
        let (spare_tx, spare) = mpsc::sync_channel(8);
        let (latest_tx, latest) = watch::channel(None);
        let publisher = std::thread::spawn(move || publish(rx, spare_tx, m, latest_tx));
        let source = Arc::new(SourceInfo {
            format: "grey",
            device: "none".into(),
        });
        let numbered = |sequence: u64| {
            let mut p = frame(sequence, &source);
            p.result.otsu_threshold = sequence as u8;
            p
        };
        tx.send(numbered(1)).expect("the publisher runs");
        wait_for(&latest, |l| l.sequence == 1);
        // A reader holds frame 1 while frame 2 replaces it: frame 1 cannot be reused yet.
        let held = latest.borrow().clone().expect("published");
        tx.send(numbered(2)).expect("the publisher runs");
        wait_for(&latest, |l| l.sequence == 2);
        tx.send(numbered(3)).expect("the publisher runs");
        wait_for(&latest, |l| l.sequence == 3);
        assert_eq!(
            held.result.otsu_threshold, 1,
            "the reader's frame is untouched"
        );
        // Frame 2 was replaced while no one read it: its result came back.
        tx.send(numbered(4)).expect("the publisher runs");
        wait_for(&latest, |l| l.sequence == 4);
        drop(tx);
        publisher.join().expect("no panic");
        // Frame 1 was held, frame 2 came back when frame 4 took its place, frame 3 waited
        // for the next frame (none came) and frame 4 is the latest.
        let back: Vec<u8> = spare.try_iter().map(|r| r.otsu_threshold).collect();
        assert_eq!(back, [2]);
    }

    /// A broken driver's frames never reach the publisher: the pipeline refuses each
    /// one's impossible results (every word read back random: histogram, threshold, sums,
    /// motion's counts), and the camera counts it under the stage whose results they
    /// were, as it counts any failed frame.
    #[test]
    fn a_broken_drivers_frames_are_refused_and_counted_by_stage() {
        use edgesight_core::cl::scribble::{self, Reads};
        use edgesight_core::pipeline::{MotionSettings, Pipeline, PipelineError, Stage};
        use edgesight_frame::frame::{FrameLayout, PixelFormat};
        let gpu = edgesight_core::cl::test_gpu();
        let layout = FrameLayout::packed(PixelFormat::Yuyv, 97, 61);
        let regions = ["door:3,5,40,30".parse().expect("region")];
        let options = PipelineOptions::default();
        let mut pipeline = Pipeline::new(&gpu, layout, options, &regions).expect("pipeline");
        pipeline
            .set_health_grid(&gpu, Some(edgesight_core::health::GRID))
            .expect("grid");
        pipeline.set_motion(Some(MotionSettings::default()));
        let mut slot = pipeline.new_slot(&gpu).expect("slot");
        slot.write_bytes(&gpu, &vec![77; layout.frame_bytes()])
            .expect("write");
        let metrics = Metrics::new();
        let m = CameraFamilies::new(&metrics, 16).camera("c", Some(30.0));
        let mut result = FrameResult::empty();
        // Motion learns on the first frame (it has no background to compare with yet).
        pipeline
            .process_into(&gpu, &slot, &mut result)
            .expect("a right frame");
        scribble::on(0xdead_beef, Reads::Results);
        let mut stages = Vec::new();
        for _ in 0..20 {
            match pipeline.process_into(&gpu, &slot, &mut result).map(drop) {
                Err(e @ PipelineError::Implausible { stage, .. }) => {
                    stages.push(stage);
                    m.pipeline_error(&e);
                }
                other => panic!("garbage taken: {other:?}"),
            }
        }
        scribble::off();
        assert!(
            stages
                .iter()
                .all(|s| [Stage::Histogram, Stage::Integral].contains(s)),
            "{stages:?}"
        );
        let counted = |stage: &str| {
            metrics
                .sample(&format!(
                    r#"edgesight_stage_errors_total{{camera="c",stage="{stage}"}}"#
                ))
                .unwrap_or(0.0)
        };
        assert_eq!(counted("histogram") + counted("integral"), 20.0);
        assert_eq!(
            metrics.sample(r#"edgesight_pipeline_errors_total{camera="c"}"#),
            Some(20.0)
        );
        // And the device right again: the frames are taken.
        pipeline
            .process_into(&gpu, &slot, &mut result)
            .expect("a right frame after the broken ones");
        assert_eq!(result.histogram[77], 97 * 61);
    }
}
