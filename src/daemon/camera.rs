//! One camera's capture/GPU thread: it owns the OpenCL device, the frame source and the
//! pipeline, so every OpenCL call of that camera happens on this thread.
//!
//! The thread never waits for anyone downstream: results go to the publisher through a
//! bounded channel, and a full channel drops the frame and counts it. Reloads and
//! snapshot requests arrive on channels it polls between frames.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{anyhow, Context, Result};
use tokio::sync::oneshot;

use crate::capture::{self, FrameSource, Next, SourceSpec};
use crate::cl::{DeviceInfo, FrameSlot, Gpu};
use crate::config::CameraSettings;
use crate::frame::FrameLayout;
use crate::metrics::{CameraMetrics, Metrics};
use crate::pipeline::{FrameResult, Pipeline, PipelineOptions, Region};

/// How long a source may wait for a frame before the loop looks at its channels and the
/// stop flag again; bounds the time to shut down.
const POLL: Duration = Duration::from_millis(100);

/// Results of one frame on their way to the publisher.
pub struct Published {
    pub result: FrameResult,
    pub options: PipelineOptions,
    pub sequence: u64,
    pub captured: Instant,
}

/// The pictures of the last processed frame, for `/snapshot/*.png`.
pub struct Snapshot {
    pub width: u32,
    pub height: u32,
    pub luma: Vec<u8>,
    pub edges: Vec<u8>,
    pub mask: Vec<u8>,
    pub histogram: [u32; 256],
    pub otsu_threshold: u8,
}

pub type SnapshotReply = oneshot::Sender<Arc<Snapshot>>;

/// New ROIs and options from a SIGHUP; the reply says whether they were taken.
pub struct Reload {
    pub options: PipelineOptions,
    pub regions: Vec<Region>,
    pub reply: oneshot::Sender<Result<(), String>>,
}

/// What the rest of the daemon knows of a started camera.
pub struct Started {
    pub device: DeviceInfo,
    pub metrics: Arc<CameraMetrics>,
    pub layout: FrameLayout,
    pub describe: String,
}

/// State shared between a camera thread and the supervisor.
pub struct Beat {
    /// Milliseconds since `epoch` at the loop's last turn: the watchdog's evidence that
    /// the loop (and so the GPU) is not stuck.
    last_turn_ms: AtomicU64,
    epoch: Instant,
}

impl Beat {
    pub fn new() -> Beat {
        Beat {
            last_turn_ms: AtomicU64::new(0),
            epoch: Instant::now(),
        }
    }

    fn turn(&self) {
        let ms = self.epoch.elapsed().as_millis() as u64;
        self.last_turn_ms.store(ms, Ordering::Relaxed);
    }

    /// Time since the loop last turned.
    pub fn since_last_turn(&self) -> Duration {
        let last = Duration::from_millis(self.last_turn_ms.load(Ordering::Relaxed));
        self.epoch.elapsed().saturating_sub(last)
    }
}

impl Default for Beat {
    fn default() -> Self {
        Beat::new()
    }
}

/// The channels a camera thread is given.
pub struct Links {
    pub stop: Arc<AtomicBool>,
    pub beat: Arc<Beat>,
    pub publish: mpsc::SyncSender<Published>,
    pub reloads: mpsc::Receiver<Reload>,
    pub snapshots: mpsc::Receiver<SnapshotReply>,
    /// Told once whether the camera started, with what it runs on.
    pub started: mpsc::SyncSender<Result<Started>>,
}

/// The far ends of a camera thread's [`Links`], kept by whoever runs the thread.
pub struct LinkEnds {
    pub beat: Arc<Beat>,
    /// Results, at most `publish_queue` of them waiting.
    pub published: mpsc::Receiver<Published>,
    pub reloads: mpsc::Sender<Reload>,
    pub snapshots: mpsc::Sender<SnapshotReply>,
    pub started: mpsc::Receiver<Result<Started>>,
}

impl Links {
    /// A camera thread's channels, stopped by `stop`, with room for `publish_queue`
    /// results before frames are dropped.
    pub fn new(stop: Arc<AtomicBool>, publish_queue: usize) -> (Links, LinkEnds) {
        let (publish, published) = mpsc::sync_channel(publish_queue);
        let (reloads_tx, reloads) = mpsc::channel();
        let (snapshots_tx, snapshots) = mpsc::channel();
        let (started, started_rx) = mpsc::sync_channel(1);
        let beat = Arc::new(Beat::new());
        let links = Links {
            stop,
            beat: Arc::clone(&beat),
            publish,
            reloads,
            snapshots,
            started,
        };
        let ends = LinkEnds {
            beat,
            published,
            reloads: reloads_tx,
            snapshots: snapshots_tx,
            started: started_rx,
        };
        (links, ends)
    }
}

struct Camera {
    gpu: Gpu,
    source: Box<dyn FrameSource>,
    pipeline: Pipeline,
    options: PipelineOptions,
}

fn open(settings: &CameraSettings) -> Result<Camera> {
    let gpu = Gpu::open(&settings.device)
        .with_context(|| format!("camera '{}': OpenCL device", settings.name))?;
    let source = capture::open(&settings.source, &gpu)
        .with_context(|| format!("camera '{}': source {}", settings.name, settings.source))?;
    let layout = source.layout();
    for r in &settings.regions {
        r.validate(&layout)
            .with_context(|| format!("camera '{}'", settings.name))?;
    }
    let pipeline = Pipeline::new(&gpu, layout, settings.options, &settings.regions)
        .with_context(|| format!("camera '{}': setting up the pipeline", settings.name))?;
    Ok(Camera {
        gpu,
        source,
        pipeline,
        options: settings.options,
    })
}

/// The thread's body: opens everything, says so on `links.started`, then runs until the
/// stop flag is set. An `Err` return is an OpenCL failure the camera cannot go on after.
pub fn run(settings: CameraSettings, metrics: Arc<Metrics>, links: Links) -> Result<()> {
    let cam = match open(&settings) {
        Ok(cam) => cam,
        Err(e) => {
            let message = format!("{e:#}");
            // The receiver only goes away when the daemon is already stopping.
            let _ = links.started.send(Err(e));
            return Err(anyhow!(message));
        }
    };
    run_opened(cam, &settings, &metrics, &links)
}

/// [`run`] once the camera is open; apart so that tests can hand it their own source.
fn run_opened(
    mut cam: Camera,
    settings: &CameraSettings,
    metrics: &Metrics,
    links: &Links,
) -> Result<()> {
    let target_fps = match &settings.source {
        SourceSpec::Pattern { fps, .. } | SourceSpec::Replay { fps, .. } => Some(*fps),
        SourceSpec::V4l2 { fps, .. } => *fps,
    };
    let m = Arc::new(metrics.camera(&settings.name, &cam.gpu.info, target_fps));
    let _ = links.started.send(Ok(Started {
        device: cam.gpu.info.clone(),
        metrics: Arc::clone(&m),
        layout: cam.source.layout(),
        describe: cam.source.describe(),
    }));
    tracing::info!(
        camera = %settings.name,
        source = %cam.source.describe(),
        io = %cam.source.io_mode(),
        device = %cam.gpu.info,
        "camera started"
    );
    let mut failures_logged = 0u32;
    // What the pipeline's images show now: snapshot requests between frames use it.
    let mut shown: Option<Shown> = None;
    while !links.stop.load(Ordering::Relaxed) {
        links.beat.turn();
        while let Ok(reload) = links.reloads.try_recv() {
            let outcome = apply(&mut cam, &reload.options, &reload.regions);
            let _ = reload.reply.send(outcome);
        }
        let next = cam
            .source
            .next_frame(&cam.gpu, POLL)
            .with_context(|| format!("camera '{}'", settings.name))?;
        let Next::Frame(frame) = next else {
            m.capture(cam.source.is_up(), &cam.source.stats());
            // The last frame's slot may be refilled by now: where luma is read from it,
            // requests wait for the next frame (the server gives up after a while).
            if let Some(shown) = shown.as_ref().filter(|_| !cam.pipeline.luma_reads_slot()) {
                answer_snapshots(
                    &cam.pipeline,
                    &cam.gpu,
                    &links.snapshots,
                    shown,
                    None,
                    &settings.name,
                );
            }
            continue;
        };
        let (sequence, captured) = (frame.sequence, frame.captured);
        let processed = cam.pipeline.process(&cam.gpu, frame.slot);
        // The frame, so its slot, is held up to here: answer while luma may be read from it.
        shown = processed.as_ref().ok().map(|result| {
            let now_shown = Shown {
                width: result.width,
                height: result.height,
                histogram: result.histogram,
                otsu_threshold: result.otsu_threshold,
            };
            answer_snapshots(
                &cam.pipeline,
                &cam.gpu,
                &links.snapshots,
                &now_shown,
                Some(frame.slot),
                &settings.name,
            );
            now_shown
        });
        m.capture(cam.source.is_up(), &cam.source.stats());
        let result = match processed {
            Ok(result) => result,
            Err(e) => {
                // `shown` is None now: the images may be half overwritten, so no snapshot
                // until a frame succeeds.
                m.pipeline_errors.inc();
                // A failing frame repeats every frame: log the first few, then count.
                if failures_logged < 5 {
                    failures_logged += 1;
                    tracing::warn!(camera = %settings.name, "frame {sequence}: {e:#}");
                }
                continue;
            }
        };
        let published = Published {
            result,
            options: cam.options,
            sequence,
            captured,
        };
        if let Err(mpsc::TrySendError::Full(_)) = links.publish.try_send(published) {
            m.backlog_dropped.inc();
        }
    }
    tracing::info!(camera = %settings.name, "camera stopped");
    Ok(())
}

/// The small results of the frame whose images the pipeline holds.
struct Shown {
    width: u32,
    height: u32,
    histogram: [u32; 256],
    otsu_threshold: u8,
}

fn apply(cam: &mut Camera, options: &PipelineOptions, regions: &[Region]) -> Result<(), String> {
    let layout = *cam.pipeline.layout();
    for r in regions {
        r.validate(&layout).map_err(|e| e.to_string())?;
    }
    cam.pipeline
        .set_regions(&cam.gpu, regions)
        .map_err(|e| format!("{e:#}"))?;
    cam.pipeline.set_options(*options);
    cam.options = *options;
    Ok(())
}

/// Reads the last frame's pictures back once for every request waiting; requests are
/// rare (the server caches a snapshot for a second), so this costs the loop little.
/// `slot` is the last frame's slot while it is still held (see [`Pipeline::read_images`]).
fn answer_snapshots(
    pipeline: &Pipeline,
    gpu: &Gpu,
    requests: &mpsc::Receiver<SnapshotReply>,
    shown: &Shown,
    slot: Option<&FrameSlot>,
    name: &str,
) {
    // Requests the server gave up on (a camera that was down) need no read-back.
    let waiting: Vec<SnapshotReply> = requests.try_iter().filter(|r| !r.is_closed()).collect();
    if waiting.is_empty() {
        return;
    }
    let images = match pipeline.read_images(gpu, slot) {
        Ok(images) => images,
        Err(e) => {
            tracing::warn!(camera = %name, "reading a snapshot: {e:#}");
            return;
        }
    };
    let snapshot = Arc::new(Snapshot {
        width: shown.width,
        height: shown.height,
        luma: images.luma,
        edges: images.magnitude,
        mask: images.mask,
        histogram: shown.histogram,
        otsu_threshold: shown.otsu_threshold,
    });
    for reply in waiting {
        let _ = reply.send(Arc::clone(&snapshot));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::capture::{CaptureError, CaptureStats, Frame, IoMode};
    use crate::cl::DeviceSpec;
    use crate::frame::PixelFormat;

    /// A camera with a single buffer, as V4L2 behaves once a buffer is requeued: the
    /// driver refills it while the loop waits, so on a turn without a frame the slot of
    /// the last frame already holds the next one.
    struct Requeued {
        layout: FrameLayout,
        slot: FrameSlot,
        sequence: u64,
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
        fn next_frame(&mut self, gpu: &Gpu, _wait: Duration) -> Result<Next<'_>, CaptureError> {
            self.sequence += 1;
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
            }))
        }
    }

    #[test]
    fn a_snapshots_luma_is_the_frame_its_mask_was_made_from() {
        let device: DeviceSpec = std::env::var("EDGESIGHT_TEST_DEVICE")
            .unwrap_or_default()
            .parse()
            .expect("device spec");
        let layout = FrameLayout::packed(PixelFormat::Grey, 32, 24);
        let options = PipelineOptions::default();
        let open_camera = {
            let device = device.clone();
            move || {
                let gpu = Gpu::open(&device).expect("an OpenCL device");
                let pipeline = Pipeline::new(&gpu, layout, options, &[]).expect("pipeline");
                let slot = pipeline.new_slot(&gpu).expect("slot");
                let source = Box::new(Requeued {
                    layout,
                    slot,
                    sequence: 0,
                });
                Camera {
                    gpu,
                    source,
                    pipeline,
                    options,
                }
            }
        };
        let probe = open_camera();
        if !probe.pipeline.luma_reads_slot() {
            eprintln!("skipped: {} has its own luma buffer", probe.gpu.info);
            return;
        }
        drop(probe);
        let settings = CameraSettings {
            name: "t".into(),
            device,
            source: "pattern:32x24@100".parse().expect("spec"),
            options,
            regions: Vec::new(),
        };
        let stop = Arc::new(AtomicBool::new(false));
        let (links, ends) = Links::new(Arc::clone(&stop), 4);
        let metrics = Metrics::new(16);
        /// Stops the camera however the test ends: a failed assertion must not leave
        /// the scope waiting for the camera thread forever.
        struct StopOnDrop(Arc<AtomicBool>);
        impl Drop for StopOnDrop {
            fn drop(&mut self) {
                self.0.store(true, Ordering::Relaxed);
            }
        }
        std::thread::scope(|s| {
            let camera = s.spawn(move || run_opened(open_camera(), &settings, &metrics, &links));
            let stopper = StopOnDrop(Arc::clone(&stop));
            for i in 0..30 {
                let (tx, mut rx) = oneshot::channel();
                ends.snapshots.send(tx).expect("the camera runs");
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
                std::thread::sleep(Duration::from_millis(i % 5));
            }
            drop(stopper);
            camera.join().expect("no panic").expect("a clean stop");
        });
    }
}
