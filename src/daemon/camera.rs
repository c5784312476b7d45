//! One camera's capture/GPU thread: it owns the OpenCL device, the frame source and the
//! pipeline, so every OpenCL call of that camera happens on this thread.
//!
//! The thread never waits for anyone downstream: results go to the publisher through a
//! bounded channel, and a full channel drops the frame and counts it. Reloads and
//! snapshot requests arrive on channels it polls between frames.
//!
//! This file holds the frame loop of an open camera (frames, reloads, snapshots);
//! `supervise` opens the camera, restarts it when it fails, and keeps the state the
//! thread shows the rest of the daemon.
//!
//! One room, long as it is: the frame loop, its reloads and its snapshot answers share
//! the camera's state on this one thread; its unit tests follow.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use tokio::sync::oneshot;

use super::camera_metrics::CameraMetrics;
use super::verify::Verifier;
use crate::config::CameraSettings;
use edgesight_capture::capture::{self, Down, FrameSource, Next, SourceSpec};
use edgesight_core::cl::{ClError, Gpu};
use edgesight_core::health::{self, HealthSettings};
use edgesight_core::motion_events::CameraMotionSettings;
use edgesight_core::pipeline::{
    FrameImages, FrameResult, MotionState, Pipeline, PipelineError, PipelineOptions, TileMask,
};
use edgesight_frame::frame::{CaptureFormat, FrameLayout};
use edgesight_frame::region::{Region, RegionError};
use edgesight_http::mailbox::CameraStatus;
use edgesight_http::mailbox::{Snapshot, SnapshotReply, SourceInfo, Wants};

#[cfg(test)]
mod picture_cost;
mod supervise;

pub use supervise::{run, run_with_source, CameraThreadState};

/// How long a source may wait for a frame before the loop looks at its channels and the
/// stop flag again; bounds the time to shut down.
const POLL: Duration = Duration::from_millis(100);

/// Results of one frame on their way to the publisher.
pub struct Published {
    pub result: FrameResult,
    pub options: PipelineOptions,
    /// The camera's health settings as of this frame: a reload reaches the publisher's
    /// detectors with the frames that follow it.
    pub health: HealthSettings,
    /// The camera's motion settings as of this frame (its events' hysteresis).
    pub motion: CameraMotionSettings,
    pub sequence: u64,
    pub captured: Instant,
    /// Host time the frame's JPEG took to decode (JPEG sources).
    pub decoded: Option<Duration>,
    pub source: Arc<SourceInfo>,
}

/// New ROIs and options from a SIGHUP; the reply says whether they were taken.
pub struct Reload {
    pub options: PipelineOptions,
    pub regions: Vec<Region>,
    pub health: HealthSettings,
    pub motion: CameraMotionSettings,
    pub verify_every: u32,
    pub reply: oneshot::Sender<Result<(), ReloadRefused>>,
}

/// Why a camera refused a reload, keeping its own settings.
#[derive(Debug, thiserror::Error)]
pub enum ReloadRefused {
    /// A new ROI does not fit the camera's frames.
    #[error(transparent)]
    Region(#[from] RegionError),
    /// The pipeline could not be set up for the new ROIs or health grid.
    #[error(transparent)]
    Pipeline(#[from] PipelineError),
}

impl Reload {
    /// Every reloadable setting into `settings`: those of a running camera, and those a
    /// camera waiting to be opened again opens with.
    fn take_into(&self, settings: &mut CameraSettings) {
        let Reload {
            options,
            regions,
            health,
            motion,
            verify_every,
            reply: _,
        } = self;
        settings.options = *options;
        settings.regions.clone_from(regions);
        settings.health = *health;
        settings.motion = *motion;
        settings.verify_every = *verify_every;
    }
}

/// The channels a camera thread is given.
pub struct Links {
    pub stop: Arc<AtomicBool>,
    pub state: Arc<CameraThreadState>,
    pub publish: mpsc::SyncSender<Published>,
    pub reloads: mpsc::Receiver<Reload>,
    pub snapshots: mpsc::Receiver<SnapshotReply>,
    /// Results the publisher is done with, to be filled again: a frame allocates nothing.
    pub spare: mpsc::Receiver<FrameResult>,
}

/// The far ends of a camera thread's [`Links`], kept by whoever runs the thread.
pub struct LinkEnds {
    pub state: Arc<CameraThreadState>,
    /// Results, at most `publish_queue` of them waiting.
    pub published: mpsc::Receiver<Published>,
    pub reloads: mpsc::Sender<Reload>,
    pub snapshots: mpsc::Sender<SnapshotReply>,
    /// Where the publisher hands results back.
    pub spare: mpsc::SyncSender<FrameResult>,
}

impl Links {
    /// A camera thread's channels, stopped by `stop`, with room for `publish_queue`
    /// results before frames are dropped.
    pub fn new(stop: Arc<AtomicBool>, publish_queue: usize) -> (Links, LinkEnds) {
        let (publish, published) = mpsc::sync_channel(publish_queue);
        let (reloads_tx, reloads) = mpsc::channel();
        let (snapshots_tx, snapshots) = mpsc::channel();
        // One more than can be in flight, so a returned result never waits.
        let (spare_tx, spare) = mpsc::sync_channel(publish_queue + 2);
        let state = Arc::new(CameraThreadState::new());
        let links = Links {
            stop,
            state: Arc::clone(&state),
            publish,
            reloads,
            snapshots,
            spare,
        };
        let ends = LinkEnds {
            state,
            published,
            reloads: reloads_tx,
            snapshots: snapshots_tx,
            spare: spare_tx,
        };
        (links, ends)
    }

    fn stopped(&self) -> bool {
        self.stop.load(Ordering::Relaxed)
    }
}

struct Camera {
    gpu: Gpu,
    source: Box<dyn FrameSource>,
    /// Built for the layout of the frames the source delivers, on the first frame: a
    /// camera that is absent at start has no layout yet, and one that comes back from a
    /// reconnect with another size or format gets a pipeline made for it.
    pipeline: Option<Pipeline>,
    /// What the published results say they came from.
    describe: Arc<SourceInfo>,
}

fn open(settings: &CameraSettings) -> Result<Camera> {
    open_with(settings, |settings, gpu| {
        capture::open(&settings.source, gpu).with_context(|| format!("source {}", settings.source))
    })
}

/// Opens the camera's OpenCL device and the source `source` makes on it.
fn open_with(
    settings: &CameraSettings,
    source: impl FnOnce(&CameraSettings, &Gpu) -> Result<Box<dyn FrameSource>>,
) -> Result<Camera> {
    let gpu = Gpu::open_with(&settings.device, settings.profiling).context("OpenCL device")?;
    let source = source(settings, &gpu)?;
    let describe = Arc::new(SourceInfo {
        format: source.layout().format.name(),
        device: gpu.info.to_string(),
    });
    Ok(Camera {
        gpu,
        source,
        pipeline: None,
        describe,
    })
}

/// The rate the camera's source is set to, where the settings say it.
pub fn target_fps(settings: &CameraSettings) -> Option<f64> {
    match &settings.source {
        SourceSpec::Pattern { fps, .. } | SourceSpec::Replay { fps, .. } => Some(*fps),
        SourceSpec::V4l2 { fps, .. } => *fps,
    }
}

/// The pipeline for frames of `layout` with the camera's regions, checked against it.
fn build_pipeline(gpu: &Gpu, layout: FrameLayout, settings: &CameraSettings) -> Result<Pipeline> {
    for r in &settings.regions {
        r.validate(&layout).with_context(|| {
            format!(
                "the camera delivers {} {}x{}",
                layout.format, layout.width, layout.height
            )
        })?;
    }
    let tuning = settings.tuning.resolve(gpu);
    let mut pipeline =
        Pipeline::with_tuning(gpu, layout, settings.options, &settings.regions, tuning)
            .context("setting up the pipeline")?;
    pipeline
        .set_health_grid(gpu, health_grid(&settings.health))
        .context("setting up the health grid")?;
    pipeline.set_motion(settings.motion.pipeline());
    pipeline.time_every(super::camera_metrics::TIMED_FRAMES);
    // Before the source's clock starts: a stall on the first frames would drop them and
    // shorten health's learning.
    pipeline
        .warm_up(gpu)
        .context("a warm-up frame through the pipeline")?;
    Ok(pipeline)
}

/// The cells the pipeline measures for the health detectors, when they run.
fn health_grid(settings: &HealthSettings) -> Option<(u32, u32)> {
    settings.enabled.then_some(health::GRID)
}

/// Runs an open camera until the stop flag is set (`Ok`) or it fails (`Err`: an OpenCL
/// failure, or a layout the regions do not fit). Apart so that tests can hand it their
/// own source.
fn run_opened(
    mut cam: Camera,
    settings: &mut CameraSettings,
    m: &CameraMetrics,
    links: &Links,
) -> Result<()> {
    let result = run_frames(&mut cam, settings, m, links);
    if let Err(e) = &result {
        if e.chain().any(|cause| cause.is::<ClError>()) {
            // An OpenCL call failed, and the context may be what broke: opened again,
            // the camera gets a new one rather than this, which the other cameras on
            // the device keep.
            cam.gpu.stop_sharing();
        }
    }
    result
}

/// [`run_opened`]'s frame loop.
fn run_frames(
    cam: &mut Camera,
    settings: &mut CameraSettings,
    m: &CameraMetrics,
    links: &Links,
) -> Result<()> {
    m.set_device(&cam.gpu.info, cam.gpu.timing);
    m.new_source();
    if cam.source.is_up() {
        tracing::info!(
            camera = %settings.name,
            source = %cam.source.describe(),
            io = %cam.source.io_mode(),
            device = %cam.gpu.info,
            tuning = %settings.tuning.resolve(&cam.gpu).name(),
            "camera opened"
        );
        // Built before the first frame is asked for: a source's clock starts with its
        // first frame, and frames due while the kernels compile would be lost.
        let layout = cam.source.layout();
        let (gpu, pipeline, describe) = (&cam.gpu, &mut cam.pipeline, &mut cam.describe);
        fit_pipeline(gpu, pipeline, describe, layout, settings, &links.state)?;
    } else {
        let waiting = match cam.source.down() {
            Down::Absent => "camera waiting for its device",
            Down::NoBandwidth { .. } => "camera waiting for USB bandwidth",
        };
        tracing::info!(
            camera = %settings.name,
            source = %cam.source.describe(),
            device = %cam.gpu.info,
            "{waiting}"
        );
        show_down(&links.state.status, cam.source.as_ref());
    }
    let mut failures_logged = 0u32;
    // A result that went nowhere (the publish queue was full, or the frame failed), filled
    // again by the next frame: a camera that outruns its publisher must not allocate a
    // result per dropped frame.
    let mut unused: Option<FrameResult> = None;
    let mut verifier = Verifier::new(settings.verify_every, Arc::clone(&m.verify));
    // Without a configured rate, the target is the driver's, once the camera is up.
    let mut target_known = target_fps(settings).is_some();
    // Snapshot requests seen before the wait for a frame: that frame answers them, with
    // its JPEG kept for them where the source has JPEG frames.
    let mut waiting: Vec<SnapshotReply> = Vec::new();
    while !links.stopped() {
        links.state.turn();
        while let Ok(reload) = links.reloads.try_recv() {
            let outcome = apply(cam, settings, &reload);
            verifier.set_every(settings.verify_every);
            let _ = reload.reply.send(outcome);
        }
        if !target_known {
            if let Some(fps) = cam.source.frame_rate() {
                m.set_target_rate(fps);
                target_known = true;
            }
        }
        waiting.extend(links.snapshots.try_iter());
        // Requests the server gave up on (a camera that was down) need no read-back.
        waiting.retain(|r| !r.is_closed());
        cam.source.keep_jpeg(!waiting.is_empty());
        let jpeg_frames = cam.source.capture_format() == CaptureFormat::Mjpeg;
        let next = cam.source.next_frame(&cam.gpu, POLL)?;
        let Next::Frame(frame) = next else {
            let up = cam.source.is_up();
            links.state.set_waiting(!up);
            if up {
                links.state.status.up();
            } else {
                show_down(&links.state.status, cam.source.as_ref());
            }
            m.capture(up, &cam.source.stats());
            // The last frame's slot may be refilled by now and luma may be read from it:
            // requests wait for the next frame (the server gives up after a while).
            continue;
        };
        let (gpu, pipeline, describe) = (&cam.gpu, &mut cam.pipeline, &mut cam.describe);
        fit_pipeline(
            gpu,
            pipeline,
            describe,
            frame.layout,
            settings,
            &links.state,
        )?;
        let Some(pipeline) = cam.pipeline.as_mut() else {
            continue;
        };
        let (sequence, captured, decoded) = (frame.sequence, frame.captured, frame.decoded);
        let jpeg = frame.jpeg;
        let mut result = unused
            .take()
            .or_else(|| links.spare.try_recv().ok())
            .unwrap_or_else(FrameResult::empty);
        let processed = pipeline
            .process_into(&cam.gpu, frame.slot, &mut result)
            .map(|images| {
                // The frame, so its slot, is held up to here: answer while luma may be
                // read from it. A request that came during the wait is answered too,
                // unless this frame's JPEG, not kept for it, is wanted: the next frame's is.
                let late = links.snapshots.try_iter().filter(|r| !r.is_closed());
                let (now, later): (Vec<_>, Vec<_>) = if jpeg_frames && jpeg.is_none() {
                    (std::mem::take(&mut waiting), late.collect())
                } else {
                    (waiting.drain(..).chain(late).collect(), Vec::new())
                };
                waiting = later;
                answer_snapshots(&images, &result, &cam.gpu, now, jpeg, &settings.name);
                verifier.offer(&cam.gpu, &images, &result, settings.options, sequence);
            });
        links.state.set_waiting(false);
        links.state.status.up();
        m.capture(cam.source.is_up(), &cam.source.stats());
        match processed {
            Ok(()) => {}
            Err(e) => {
                // No snapshot from a failed frame: its images may be half overwritten.
                m.pipeline_error(&e);
                // A failing frame repeats every frame: log the first few, then count.
                if failures_logged < 5 {
                    failures_logged += 1;
                    tracing::warn!(camera = %settings.name, "frame {sequence}: {e:#}");
                }
                unused = Some(result);
                continue;
            }
        };
        let published = Published {
            result,
            options: settings.options,
            health: settings.health,
            motion: settings.motion,
            sequence,
            captured,
            decoded,
            source: Arc::clone(&cam.describe),
        };
        if let Err(mpsc::TrySendError::Full(p)) = links.publish.try_send(published) {
            m.backlog_dropped(1);
            unused = Some(p.result);
        }
    }
    Ok(())
}

/// Makes sure the camera's pipeline is built for frames of `layout`: a camera that comes
/// back from a reconnect with another size or format gets one made for it.
fn fit_pipeline(
    gpu: &Gpu,
    pipeline: &mut Option<Pipeline>,
    describe: &mut Arc<SourceInfo>,
    layout: FrameLayout,
    settings: &CameraSettings,
    state: &CameraThreadState,
) -> Result<()> {
    if pipeline.as_ref().map(|p| *p.layout()) == Some(layout) {
        return Ok(());
    }
    if pipeline.is_some() {
        tracing::info!(
            camera = %settings.name,
            "frames now {} {}x{} (stride {}): building the pipeline again",
            layout.format,
            layout.width,
            layout.height,
            layout.stride
        );
    }
    *pipeline = None;
    let built = state.slow_step(supervise::SLOW_STEP_GRACE, || {
        build_pipeline(gpu, layout, settings)
    });
    *pipeline = Some(built?);
    *describe = Arc::new(SourceInfo {
        format: layout.format.name(),
        device: gpu.info.to_string(),
    });
    state.set_layout(layout);
    Ok(())
}

/// Takes new options, regions and health settings; they also stay in `settings` for a
/// reopened camera.
fn apply(
    cam: &mut Camera,
    settings: &mut CameraSettings,
    reload: &Reload,
) -> Result<(), ReloadRefused> {
    if let Some(pipeline) = cam.pipeline.as_mut() {
        let layout = *pipeline.layout();
        for r in &reload.regions {
            r.validate(&layout)?;
        }
        pipeline.set_regions(&cam.gpu, &reload.regions)?;
        if reload.health.enabled != settings.health.enabled {
            pipeline.set_health_grid(&cam.gpu, health_grid(&reload.health))?;
        }
        pipeline.set_options(reload.options);
        pipeline.set_motion(reload.motion.pipeline());
    }
    reload.take_into(settings);
    Ok(())
}

/// Shows a source that delivers no frames as waiting for its device or, when its bus
/// has no bandwidth for its stream, as that: both are opened again by the source.
fn show_down(status: &CameraStatus, source: &dyn FrameSource) {
    match source.down() {
        Down::Absent => status.waiting_for_device(),
        Down::NoBandwidth { error } => status.no_usb_bandwidth(|| error.to_string()),
    }
}

/// Answers every request in `waiting` with one read-back of the frame: every picture if
/// one of them wants them, else an event's picture alone (the frame's JPEG, where the
/// source kept it, with nothing read back; else its luma). Requests are rare (the server
/// caches a snapshot for a second, an event asks once), so this costs the loop little.
fn answer_snapshots(
    images: &FrameImages,
    frame: &FrameResult,
    gpu: &Gpu,
    waiting: Vec<SnapshotReply>,
    jpeg: Option<&[u8]>,
    name: &str,
) {
    if waiting.is_empty() {
        return;
    }
    let answer = if waiting.iter().any(|r| r.wants == Wants::Pictures) {
        every_picture(images, frame, gpu, jpeg)
    } else {
        event_picture(images, frame, gpu, jpeg)
    };
    let snapshot = match answer {
        Ok(snapshot) => Arc::new(snapshot),
        Err(e) => {
            tracing::warn!(camera = %name, "reading a snapshot: {e:#}");
            return;
        }
    };
    for reply in waiting {
        let _ = reply.send(Arc::clone(&snapshot));
    }
}

fn every_picture(
    images: &FrameImages,
    frame: &FrameResult,
    gpu: &Gpu,
    jpeg: Option<&[u8]>,
) -> Result<Snapshot> {
    let pictures = images.read_pictures(gpu)?;
    let mask = images
        .read_motion_mask(gpu)
        .context("its motion")?
        .filter(|_| frame.motion.state == MotionState::Watching);
    let motion = motion_picture(&pictures.luma, frame.width as usize, mask.as_ref());
    Ok(Snapshot {
        width: frame.width,
        height: frame.height,
        luma: pictures.luma,
        gradient: pictures.magnitude,
        mask: pictures.mask,
        motion,
        histogram: frame.histogram,
        otsu_threshold: frame.otsu_threshold,
        jpeg: jpeg.map(<[u8]>::to_vec),
    })
}

fn event_picture(
    images: &FrameImages,
    frame: &FrameResult,
    gpu: &Gpu,
    jpeg: Option<&[u8]>,
) -> Result<Snapshot> {
    let luma = match jpeg {
        Some(_) => Vec::new(),
        None => images.read_luma(gpu)?,
    };
    Ok(Snapshot {
        width: frame.width,
        height: frame.height,
        luma,
        gradient: Vec::new(),
        mask: Vec::new(),
        motion: Vec::new(),
        histogram: frame.histogram,
        otsu_threshold: frame.otsu_threshold,
        jpeg: jpeg.map(<[u8]>::to_vec),
    })
}

/// Luma with each still tile dimmed to a third, a pixel taking the tile it falls in (the
/// last column and row of tiles taking the pixels past the whole tiles); all of it dimmed
/// without a mask.
fn motion_picture(luma: &[u8], width: usize, mask: Option<&TileMask>) -> Vec<u8> {
    luma.iter()
        .enumerate()
        .map(|(i, &v)| {
            let moving = mask.is_some_and(|m| m.moving(i % width, i / width));
            if moving {
                v
            } else {
                v / 3
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::daemon::camera_metrics::CameraFamilies;
    use edgesight_capture::capture::{CaptureError, CaptureStats, Frame, IoMode};
    use edgesight_core::cl::{DeviceSpec, FrameSlot};
    use edgesight_core::pipeline::TuningChoice;
    use edgesight_frame::frame::PixelFormat;
    use edgesight_http::metrics::Metrics;

    /// A camera with a single buffer, as V4L2 behaves once a buffer is requeued: the
    /// driver refills it while the loop waits, so on a turn without a frame the slot of
    /// the last frame already holds the next one.
    struct Requeued {
        layout: FrameLayout,
        slot: FrameSlot,
        sequence: u64,
        /// As an MJPEG camera: each frame's "JPEG" (its sequence number, in decimal)
        /// copied out only while asked.
        jpeg_frames: bool,
        keep: bool,
        kept: Vec<u8>,
    }

    impl Requeued {
        fn new(layout: FrameLayout, slot: FrameSlot, jpeg_frames: bool) -> Requeued {
            Requeued {
                layout,
                slot,
                sequence: 0,
                jpeg_frames,
                keep: false,
                kept: Vec::new(),
            }
        }
    }

    /// A camera's settings as the tests' cameras take them: the test pattern's source
    /// (never opened: the tests hand the camera its source), `device` and `options`.
    fn test_settings(device: DeviceSpec, options: PipelineOptions) -> CameraSettings {
        CameraSettings {
            name: "t".into(),
            device,
            tuning: TuningChoice::Auto,
            verify_every: 0,
            profiling: edgesight_core::cl::Profiling::Auto,
            source: "pattern:32x24@100".parse().expect("spec"),
            options,
            regions: Vec::new(),
            health: edgesight_core::health::HealthSettings::default(),
            motion: CameraMotionSettings::default(),
        }
    }

    impl FrameSource for Requeued {
        fn describe(&self) -> String {
            "one requeued buffer".into()
        }
        fn layout(&self) -> FrameLayout {
            self.layout
        }
        fn io_mode(&self) -> IoMode {
            IoMode::Mmap
        }
        fn is_up(&self) -> bool {
            true
        }
        fn stats(&self) -> CaptureStats {
            CaptureStats::default()
        }
        fn capture_format(&self) -> CaptureFormat {
            match self.jpeg_frames {
                true => CaptureFormat::Mjpeg,
                false => CaptureFormat::Pixels(self.layout.format),
            }
        }
        fn keep_jpeg(&mut self, keep: bool) {
            self.keep = keep;
        }
        fn next_frame(&mut self, gpu: &Gpu, _wait: Duration) -> Result<Next<'_>, CaptureError> {
            self.sequence += 1;
            self.kept.clear();
            if self.jpeg_frames && self.keep {
                self.kept.extend(self.sequence.to_string().bytes());
            }
            let (width, shift) = (self.layout.width as usize, self.sequence as usize * 101);
            self.slot
                .write(gpu, |bytes| {
                    for (i, b) in bytes.iter_mut().enumerate() {
                        let (x, y) = (i % width, i / width);
                        *b = ((x * 7 + y * 13 + shift) % 256) as u8;
                    }
                })
                .map_err(|source| CaptureError::Cl {
                    source_name: self.describe(),
                    source,
                })?;
            if self.sequence % 2 == 1 {
                // Most of the loop's time goes here, so most requests arrive now.
                std::thread::sleep(Duration::from_millis(3));
                return Ok(Next::Idle);
            }
            Ok(Next::Frame(Frame {
                slot: &self.slot,
                layout: self.layout,
                sequence: self.sequence,
                captured: Instant::now(),
                decoded: None,
                jpeg: (!self.kept.is_empty()).then_some(&self.kept[..]),
            }))
        }
    }

    /// A reload whose ROI leaves the frame is refused naming the ROI, and the camera
    /// keeps its own settings.
    #[test]
    fn a_reload_whose_roi_leaves_the_frame_is_refused() {
        let gpu = edgesight_core::cl::test_gpu();
        let layout = FrameLayout::packed(PixelFormat::Grey, 32, 24);
        let options = PipelineOptions::default();
        let pipeline = Pipeline::new(&gpu, layout, options, &[]).expect("pipeline");
        let slot = pipeline.new_slot(&gpu).expect("slot");
        let describe = Arc::new(SourceInfo {
            format: layout.format.name(),
            device: gpu.info.to_string(),
        });
        let mut cam = Camera {
            gpu,
            source: Box::new(Requeued::new(layout, slot, false)),
            pipeline: Some(pipeline),
            describe,
        };
        let mut settings = test_settings(DeviceSpec::default(), options);
        let (reply, _answer) = oneshot::channel();
        let reload = Reload {
            options,
            regions: vec!["door:30,20,8,8".parse().expect("region")],
            health: settings.health,
            motion: settings.motion,
            verify_every: 5,
            reply,
        };
        let err = apply(&mut cam, &mut settings, &reload).expect_err("outside the frame");
        assert!(
            matches!(&err, ReloadRefused::Region(RegionError::Outside { name, .. }) if name == "door"),
            "{err:?}"
        );
        assert_eq!((settings.regions.len(), settings.verify_every), (0, 0));
    }

    #[test]
    fn a_snapshots_luma_is_the_frame_its_mask_was_made_from() {
        answer_requests(false, Wants::Pictures, |i, snap| {
            let mut histogram = [0u32; 256];
            for &v in &snap.luma {
                histogram[v as usize] += 1;
            }
            assert_eq!(histogram, snap.histogram, "request {i}: luma vs histogram");
            let t = snap.otsu_threshold;
            for (p, (&l, &m)) in snap.luma.iter().zip(&snap.mask).enumerate() {
                assert_eq!(
                    m == 255,
                    l > t,
                    "request {i}, pixel {p}: luma {l}, mask {m}, threshold {t}"
                );
            }
            assert_eq!(snap.jpeg, None, "request {i}: frames of pixels have none");
        });
    }

    /// An MJPEG camera hands its JPEG over only when asked before the frame: a request
    /// that arrives during the wait for a frame is answered by the next one, with its
    /// JPEG, never with a frame's luma and no JPEG or another frame's.
    #[test]
    fn an_mjpeg_cameras_snapshot_has_the_jpeg_of_its_own_frame() {
        answer_requests(true, Wants::Pictures, |i, snap| {
            let jpeg = snap
                .jpeg
                .as_ref()
                .unwrap_or_else(|| panic!("request {i}: no JPEG"));
            let sequence: usize = std::str::from_utf8(jpeg).unwrap().parse().unwrap();
            assert_eq!(
                usize::from(snap.luma[0]),
                sequence * 101 % 256,
                "request {i}: the luma of another frame than JPEG {sequence}'s"
            );
        });
    }

    /// An event's picture alone is read back as no more than it needs: an MJPEG camera's
    /// JPEG with no picture, another camera's luma (of the frame its histogram is of) and
    /// nothing else.
    #[test]
    fn an_event_picture_is_answered_with_its_jpeg_or_its_luma_alone() {
        answer_requests(true, Wants::EventPicture, |i, snap| {
            assert!(snap.jpeg.is_some(), "request {i}: no JPEG");
            assert!(
                snap.luma.is_empty() && snap.gradient.is_empty() && snap.motion.is_empty(),
                "request {i}: pictures read back beside the JPEG"
            );
        });
        answer_requests(false, Wants::EventPicture, |i, snap| {
            assert_eq!(snap.luma.len(), 32 * 24, "request {i}");
            let mut histogram = [0u32; 256];
            for &v in &snap.luma {
                histogram[v as usize] += 1;
            }
            assert_eq!(histogram, snap.histogram, "request {i}: luma vs histogram");
            assert!(
                snap.gradient.is_empty() && snap.mask.is_empty() && snap.motion.is_empty(),
                "request {i}: more than the luma read back"
            );
            assert_eq!(snap.jpeg, None, "request {i}");
        });
    }

    /// Runs a camera on a [`Requeued`] source and checks the answers to 30 snapshot
    /// requests wanting `wants`, sent at varied moments of its loop, with `check`.
    fn answer_requests(jpeg_frames: bool, wants: Wants, check: impl Fn(u64, &Snapshot)) {
        let device: DeviceSpec = std::env::var("EDGESIGHT_TEST_DEVICE")
            .unwrap_or_default()
            .parse()
            .expect("device spec");
        let layout = FrameLayout::packed(PixelFormat::Grey, 32, 24);
        let options = PipelineOptions::default();
        // The slot comes from a pipeline of the same layout; the camera builds its own.
        let open_camera = {
            let device = device.clone();
            move || {
                let gpu = Gpu::open(&device).expect("an OpenCL device");
                let pipeline = Pipeline::new(&gpu, layout, options, &[]).expect("pipeline");
                let slot = pipeline.new_slot(&gpu).expect("slot");
                let source = Box::new(Requeued::new(layout, slot, jpeg_frames));
                let describe = Arc::new(SourceInfo {
                    format: layout.format.name(),
                    device: gpu.info.to_string(),
                });
                Camera {
                    gpu,
                    source,
                    pipeline: None,
                    describe,
                }
            }
        };
        let mut settings = test_settings(device, options);
        let stop = Arc::new(AtomicBool::new(false));
        let (links, ends) = Links::new(Arc::clone(&stop), 4);
        let metrics = Metrics::new();
        let m = CameraFamilies::new(&metrics, 16).camera("t", None);
        /// Stops the camera however the test ends: a failed assertion must not leave
        /// the scope waiting for the camera thread forever.
        struct StopOnDrop(Arc<AtomicBool>);
        impl Drop for StopOnDrop {
            fn drop(&mut self) {
                self.0.store(true, Ordering::Relaxed);
            }
        }
        std::thread::scope(|s| {
            let camera = s.spawn(move || run_opened(open_camera(), &mut settings, &m, &links));
            let stopper = StopOnDrop(Arc::clone(&stop));
            for i in 0..30 {
                let (tx, mut rx) = oneshot::channel();
                let request = match wants {
                    Wants::Pictures => SnapshotReply::pictures(tx),
                    Wants::EventPicture => SnapshotReply::event_picture(tx),
                };
                ends.snapshots.send(request).expect("the camera runs");
                // The first frame may compile kernels (seconds on a cold POCL cache).
                let deadline = Instant::now() + Duration::from_secs(60);
                let snap = loop {
                    match rx.try_recv() {
                        Ok(snap) => break snap,
                        Err(oneshot::error::TryRecvError::Empty) => {
                            assert!(Instant::now() < deadline, "request {i}: no snapshot");
                            std::thread::sleep(Duration::from_millis(1));
                        }
                        Err(e) => panic!("request {i}: {e}"),
                    }
                };
                check(i, &snap);
                std::thread::sleep(Duration::from_millis(i % 5));
            }
            drop(stopper);
            camera.join().expect("no panic").expect("a clean stop");
        });
    }
}
