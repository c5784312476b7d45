//! A warm pipeline, and a warm camera with its publisher, allocate no host memory per
//! frame, also while frames are dropped because the camera or the publisher fell behind:
//! every Rust allocation of the process is counted while frames go through (the tests of
//! this binary take turns, so none counts another's).
//!
//! Over 500 lines as one room: its tests share the counting allocator, which is global to
//! the binary, and the warm camera they drive; apart, each binary would need its own.

mod common;

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::sync::watch;

use edgesight::capture::{
    self, CaptureError, CaptureStats, DropReason, FrameSource, IoMode, Next, SourceSpec,
};
use edgesight::cl::Gpu;
use edgesight::config::CameraSettings;
use edgesight::daemon::camera::{self, Links};
use edgesight::daemon::camera_metrics::{CameraFamilies, CameraMetrics};
use edgesight::daemon::publish;
use edgesight::daemon::verify::CHECKED_STAGES;
use edgesight::frame::{FrameLayout, PixelFormat};
use edgesight::health::{self, HealthSettings};
use edgesight::mailbox::Latest;
use edgesight::metrics::Metrics;
use edgesight::pipeline::{FrameResult, Pipeline, PipelineOptions, Tuning, TuningChoice};

/// One test counts at a time.
static TURN: Mutex<()> = Mutex::new(());

struct Counting;

static ALLOCATIONS: AtomicUsize = AtomicUsize::new(0);

thread_local! {
    /// The allocations of the calling thread alone: the camera thread's, while the
    /// verifier allocates on its own.
    static THREAD_ALLOCATIONS: Cell<usize> = const { Cell::new(0) };
}

fn count() {
    ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
    // A thread being torn down has no counter left; its allocations count only above.
    let _ = THREAD_ALLOCATIONS.try_with(|n| n.set(n.get() + 1));
}

// SAFETY: every call is passed on unchanged to the system allocator, which upholds
// GlobalAlloc's contract; counting touches only an atomic and a const-initialised
// thread-local without a destructor, neither of which allocates.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        count();
        // SAFETY: the caller's layout, as GlobalAlloc::alloc requires it.
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: `ptr` came from `alloc` or `realloc` above, that is from System, with
        // this layout.
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        count();
        // SAFETY: as in `dealloc`; `new_size` as the caller gives it.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

#[test]
fn a_warm_pipeline_allocates_nothing_per_frame() {
    let _turn = TURN.lock().unwrap_or_else(|e| e.into_inner());
    let gpu = common::gpu();
    let mut rng = common::Rng::new(6);
    let layout = FrameLayout::packed(PixelFormat::Yuyv, 97, 41);
    let frames = [
        rng.bytes(layout.frame_bytes()),
        rng.bytes(layout.frame_bytes()),
    ];
    let regions = [
        "a:0,0,10,10".parse().unwrap(),
        "b:5,5,90,30".parse().unwrap(),
    ];
    for (name, tuning) in Tuning::ALL {
        let mut pipeline =
            Pipeline::with_tuning(&gpu, layout, PipelineOptions::default(), &regions, tuning)
                .unwrap();
        pipeline.set_health_grid(&gpu, Some(health::GRID)).unwrap();
        let mut slot = pipeline.new_slot(&gpu).unwrap();
        let mut result = FrameResult::empty();
        for frame in &frames {
            slot.write_bytes(&gpu, frame).unwrap();
            pipeline.process_into(&gpu, &slot, &mut result).unwrap();
        }
        let before = ALLOCATIONS.load(Ordering::Relaxed);
        for i in 0..10 {
            slot.write_bytes(&gpu, &frames[i % 2]).unwrap();
            pipeline.process_into(&gpu, &slot, &mut result).unwrap();
        }
        let during = ALLOCATIONS.load(Ordering::Relaxed) - before;
        assert_eq!(
            during, 0,
            "{during} allocations in 10 warm frames, {name} tuning"
        );
        assert_eq!(result.regions.len(), 2);
        assert_eq!(result.regions[1].0.name, "b");
    }
}

/// A camera thread and its publisher, as the daemon runs them: test pattern at 100 fps,
/// two ROIs and the health grid (learnt in 0.5 s), snapshots polled.
struct WarmCamera {
    stop: Arc<AtomicBool>,
    metrics: Arc<CameraMetrics>,
    latest: watch::Receiver<Option<Arc<Latest>>>,
    threads: Vec<std::thread::JoinHandle<()>>,
}

fn settings() -> CameraSettings {
    let device = std::env::var("EDGESIGHT_TEST_DEVICE")
        .unwrap_or_default()
        .parse()
        .expect("device spec");
    CameraSettings {
        name: "c".into(),
        device,
        tuning: TuningChoice::Auto,
        // The verifier's reference allocates, on its own thread: the test that turns it
        // on counts the camera thread's allocations alone.
        verify_every: 0,
        profiling: edgesight::cl::Profiling::Auto,
        source: "pattern:160x120@100".parse().expect("spec"),
        options: PipelineOptions::default(),
        regions: vec![
            "a:0,0,10,10".parse().unwrap(),
            "b:5,5,90,30".parse().unwrap(),
        ],
        health: HealthSettings {
            learning_seconds: 0.5,
            ..HealthSettings::default()
        },
        // On, as by default: its kernels, events and report allocate nothing once warm.
        motion: edgesight::motion_events::CameraMotionSettings::default(),
    }
}

impl WarmCamera {
    /// The camera with its own source and publisher, results queued up to 8 as in the
    /// daemon.
    fn start() -> WarmCamera {
        WarmCamera::start_with(settings(), |source| source)
    }

    /// [`WarmCamera::start`] with `settings`, and the source `wrap` makes of the camera's.
    fn start_with(
        settings: CameraSettings,
        wrap: impl Fn(Box<dyn FrameSource>) -> Box<dyn FrameSource> + Send + 'static,
    ) -> WarmCamera {
        let stop = Arc::new(AtomicBool::new(false));
        let (links, ends) = Links::new(Arc::clone(&stop), 8);
        let metrics = Metrics::new();
        let m = Arc::new(CameraFamilies::new(&metrics, 16).camera("c", Some(100.0)));
        let (latest_tx, latest) = watch::channel(None);
        let camera = {
            let m = Arc::clone(&m);
            std::thread::spawn(move || {
                camera::run_with_source(settings, m, links, |settings, gpu| {
                    Ok(wrap(capture::open(&settings.source, gpu)?))
                })
            })
        };
        let publisher = {
            let m = Arc::clone(&m);
            std::thread::spawn(move || publish(ends.published, ends.spare, m, latest_tx))
        };
        WarmCamera {
            stop,
            metrics: m,
            latest,
            threads: vec![camera, publisher],
        }
    }

    /// The camera falling behind its source on every 25th frame (40 ms, four frame
    /// times, as a slow pipeline would), results queued up to 2 for a publisher that
    /// falls behind on every 10th (50 ms) and stalls past its idle time on every 150th
    /// (600 ms: the last frame is shown again with the drops counted meanwhile), and a
    /// reader (a request being answered) holding the latest frame for 30 ms, three
    /// times a second. `events` counts what happened, for the test to wait on.
    fn start_falling_behind(events: Arc<Events>) -> WarmCamera {
        let stop = Arc::new(AtomicBool::new(false));
        let (links, ends) = Links::new(Arc::clone(&stop), 2);
        let metrics = Metrics::new();
        let m = Arc::new(CameraFamilies::new(&metrics, 16).camera("c", Some(100.0)));
        let (latest_tx, latest) = watch::channel(None);
        let camera = {
            let m = Arc::clone(&m);
            std::thread::spawn(move || {
                camera::run_with_source(settings(), m, links, |settings, gpu| {
                    Ok(falls_behind(capture::open(&settings.source, gpu)?))
                })
            })
        };
        // Between the camera and the publisher: what reaches the publisher, late.
        let (relay_tx, relay_rx) = mpsc::sync_channel(1);
        let relay = {
            let events = Arc::clone(&events);
            std::thread::spawn(move || {
                for (i, p) in ends.published.iter().enumerate() {
                    if i % 10 == 5 {
                        std::thread::sleep(Duration::from_millis(50));
                    }
                    if i % 150 == 75 {
                        std::thread::sleep(Duration::from_millis(600));
                        events.stalls.fetch_add(1, Ordering::Relaxed);
                    }
                    if relay_tx.send(p).is_err() {
                        return;
                    }
                }
            })
        };
        let publisher = {
            let m = Arc::clone(&m);
            std::thread::spawn(move || publish(relay_rx, ends.spare, m, latest_tx))
        };
        let reader = {
            let (stop, mut latest) = (Arc::clone(&stop), latest.clone());
            std::thread::spawn(move || {
                let mut last = None;
                let mut turns = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    turns += 1;
                    if latest.has_changed().unwrap_or(false) {
                        let seen = latest.borrow_and_update().clone();
                        let sequence = seen.as_ref().map(|l| l.sequence);
                        if sequence.is_some() && sequence == last {
                            events.shown_again.fetch_add(1, Ordering::Relaxed);
                        }
                        last = sequence;
                        if turns.is_multiple_of(10) {
                            // Held across frames: the publisher must not reuse it.
                            std::thread::sleep(Duration::from_millis(30));
                            events.held.fetch_add(1, Ordering::Relaxed);
                        }
                        drop(seen);
                    }
                    std::thread::sleep(Duration::from_millis(3));
                }
            })
        };
        WarmCamera {
            stop,
            metrics: m,
            latest,
            threads: vec![camera, relay, publisher, reader],
        }
    }

    fn sequence(&self) -> u64 {
        self.latest.borrow().as_ref().map_or(0, |l| l.sequence)
    }

    /// Waits until `done` (up to two minutes, for a loaded machine).
    fn wait(&self, what: &str, done: impl Fn(&WarmCamera) -> bool) {
        let deadline = Instant::now() + Duration::from_secs(120);
        while !done(self) {
            assert!(
                Instant::now() < deadline,
                "{what} never came (frame {})",
                self.sequence()
            );
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    /// Past learning (0.5 s) and the frame-rate window (2 s).
    fn wait_warm(&self) {
        self.wait("frame 300", |c| c.sequence() >= 300);
        let learned = self
            .latest
            .borrow()
            .as_ref()
            .and_then(|l| l.health)
            .is_some_and(|h| !h.learning);
        assert!(
            learned,
            "health still learning at frame {}",
            self.sequence()
        );
    }

    fn stop(self) {
        self.stop.store(true, Ordering::Relaxed);
        for t in self.threads {
            t.join().expect("no thread panics");
        }
    }
}

/// What [`WarmCamera::start_falling_behind`]'s publisher and reader went through.
#[derive(Default)]
struct Events {
    stalls: AtomicU64,
    shown_again: AtomicU64,
    held: AtomicU64,
}

impl Events {
    fn now(&self) -> [u64; 3] {
        [&self.stalls, &self.shown_again, &self.held].map(|n| n.load(Ordering::Relaxed))
    }
}

/// A camera's source with `before` run on the camera's thread each time the camera asks
/// it for a frame.
struct Hooked<F> {
    inner: Box<dyn FrameSource>,
    before: F,
}

impl<F: FnMut() + Send> FrameSource for Hooked<F> {
    fn describe(&self) -> String {
        self.inner.describe()
    }
    fn layout(&self) -> FrameLayout {
        self.inner.layout()
    }
    fn io_mode(&self) -> IoMode {
        self.inner.io_mode()
    }
    fn is_up(&self) -> bool {
        self.inner.is_up()
    }
    fn stats(&self) -> CaptureStats {
        self.inner.stats()
    }
    fn next_frame(&mut self, gpu: &Gpu, wait: Duration) -> Result<Next<'_>, CaptureError> {
        (self.before)();
        self.inner.next_frame(gpu, wait)
    }
}

/// A source whose camera loop falls behind: every 25th turn it sleeps 40 ms before asking
/// for a frame, so the source finds frames missed (sequence gaps), as it would behind a
/// slow pipeline.
fn falls_behind(inner: Box<dyn FrameSource>) -> Box<dyn FrameSource> {
    let mut turns = 0u64;
    Box::new(Hooked {
        inner,
        before: move || {
            turns += 1;
            if turns.is_multiple_of(25) {
                std::thread::sleep(Duration::from_millis(40));
            }
        },
    })
}

/// The daemon's per-frame path: the camera thread (pipeline with two ROIs and the health
/// grid, snapshots polled) and the publisher (metrics, health detectors, the latest-frame
/// mailbox), counted over 100 frames once learning is over.
#[test]
fn a_warm_camera_and_its_publisher_allocate_nothing_per_frame() {
    let _turn = TURN.lock().unwrap_or_else(|e| e.into_inner());
    let camera = WarmCamera::start();
    camera.wait_warm();
    let (from, before) = (camera.sequence(), ALLOCATIONS.load(Ordering::Relaxed));
    camera.wait("100 more frames", |c| c.sequence() >= from + 100);
    let (to, during) = (
        camera.sequence(),
        ALLOCATIONS.load(Ordering::Relaxed) - before,
    );
    camera.stop();
    assert_eq!(during, 0, "{during} allocations from frame {from} to {to}");
}

/// `verify_every = 2`: every other frame is copied for the verifier (more often than
/// the verifier keeps up with, so due frames also find the last check still running).
/// The camera's thread allocates nothing per frame meanwhile, and every check passes.
#[test]
fn a_verifying_camera_thread_allocates_nothing_per_frame() {
    let _turn = TURN.lock().unwrap_or_else(|e| e.into_inner());
    let allocations = Arc::new(AtomicUsize::new(0));
    let settings = CameraSettings {
        verify_every: 2,
        profiling: edgesight::cl::Profiling::Auto,
        ..settings()
    };
    let camera = {
        let allocations = Arc::clone(&allocations);
        WarmCamera::start_with(settings, move |inner| {
            // How many allocations the camera's thread has made, each time it asks for a
            // frame.
            let allocations = Arc::clone(&allocations);
            Box::new(Hooked {
                inner,
                before: move || {
                    let n = THREAD_ALLOCATIONS.with(Cell::get);
                    allocations.store(n, Ordering::Relaxed);
                },
            })
        })
    };
    camera.wait_warm();
    let verify = &camera.metrics.verify;
    camera.wait("a check", |_| verify.verified() > 0);
    let (from, before) = (camera.sequence(), allocations.load(Ordering::Relaxed));
    let checked = verify.verified();
    camera.wait("100 more frames and 10 more checks", |c| {
        c.sequence() >= from + 100 && verify.verified() >= checked + 10
    });
    let (to, during) = (
        camera.sequence(),
        allocations.load(Ordering::Relaxed) - before,
    );
    let mismatches = CHECKED_STAGES.map(|stage| verify.mismatches(stage));
    let checks = verify.verified() - checked;
    camera.stop();
    // The last check, done after the camera stopped, must not count in the next test.
    let deadline = Instant::now() + Duration::from_secs(60);
    while edgesight::daemon::verify::pending() > 0 {
        assert!(Instant::now() < deadline, "the verifier never finished");
        std::thread::sleep(Duration::from_millis(5));
    }
    assert_eq!(
        during, 0,
        "{during} allocations on the camera's thread from frame {from} to {to} ({checks} checks)"
    );
    assert_eq!(mismatches, [0; CHECKED_STAGES.len()], "{CHECKED_STAGES:?}");
}

/// The same path while frames are dropped, on purpose rather than by the machine's
/// load: frames the camera missed (sequence gaps), results the full publish queue
/// refused (publish backlog), the last frame shown again while the publisher waited, and
/// a reader holding the latest frame while newer ones come. Counted from a point where
/// each has happened once, until each has happened again and 100 frames went by.
#[test]
fn a_camera_falling_behind_allocates_nothing_while_it_drops_frames() {
    let _turn = TURN.lock().unwrap_or_else(|e| e.into_inner());
    let events = Arc::new(Events::default());
    let camera = WarmCamera::start_falling_behind(Arc::clone(&events));
    camera.wait_warm();
    camera.wait("a publisher stall", |_| events.now().iter().all(|&n| n > 0));
    let drops = |c: &WarmCamera| {
        let a = c.metrics.activity();
        (a.dropped[DropReason::SequenceGap as usize], a.backlog)
    };
    let (from, before) = (camera.sequence(), ALLOCATIONS.load(Ordering::Relaxed));
    let (gaps, backlog) = drops(&camera);
    let seen = events.now();
    camera.wait("every kind of drop again", |c| {
        let (g, b) = drops(c);
        g > gaps
            && b > backlog
            && events.now().iter().zip(seen).all(|(&n, s)| n > s)
            && c.sequence() >= from + 100
    });
    let (to, during) = (
        camera.sequence(),
        ALLOCATIONS.load(Ordering::Relaxed) - before,
    );
    let (g, b) = drops(&camera);
    camera.stop();
    assert_eq!(
        during,
        0,
        "{during} allocations from frame {from} to {to}, while {} frames were missed and {} \
         refused by the publish queue",
        g - gaps,
        b - backlog
    );
}

/// An MJPEG source's per-frame path: each frame's JPEG read from the recording and its
/// luma decoded into the slot (the path an MJPEG camera's frames take after the driver),
/// then the pipeline, counted over 20 warm frames. Whole images of several kinds, and a
/// cut one dropped as corrupt on every loop.
#[test]
fn a_warm_mjpeg_source_allocates_nothing_per_frame() {
    let _turn = TURN.lock().unwrap_or_else(|e| e.into_inner());
    let gpu = common::gpu();
    let fixtures = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/jpeg/");
    let read = |name: &str| std::fs::read(format!("{fixtures}{name}")).unwrap();
    let mut recording = Vec::new();
    for name in ["scene-420.jpg", "restarts.jpg", "no-huffman-tables.jpg"] {
        recording.extend(read(name));
    }
    let cut = read("progressive.jpg");
    recording.extend(&cut[..cut.len() / 2]);
    let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("steady-mjpeg");
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("clip.mjpeg");
    std::fs::write(&path, &recording).unwrap();
    let spec: SourceSpec = format!("replay:{}@1000", path.display()).parse().unwrap();
    let mut source = capture::open(&spec, &gpu).unwrap();
    let mut pipeline =
        Pipeline::new(&gpu, source.layout(), PipelineOptions::default(), &[]).unwrap();
    let mut result = FrameResult::empty();
    let mut frames = 0;
    let mut counted = None;
    while frames < 30 {
        if frames == 10 && counted.is_none() {
            counted = Some(ALLOCATIONS.load(Ordering::Relaxed));
        }
        if let Next::Frame(frame) = source.next_frame(&gpu, Duration::from_millis(20)).unwrap() {
            pipeline
                .process_into(&gpu, frame.slot, &mut result)
                .unwrap();
            frames += 1;
        }
    }
    let during = ALLOCATIONS.load(Ordering::Relaxed) - counted.unwrap();
    assert!(source.stats().dropped(DropReason::CorruptFrame) >= 5);
    assert_eq!(during, 0, "{during} allocations in 20 warm MJPEG frames");
}
