//! A warm pipeline, and a warm camera with its publisher, allocate no host memory per
//! frame: every Rust allocation of the process is counted while frames go through (the
//! tests of this binary take turns, so none counts another's).

mod common;

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use edgesight::capture::{self, DropReason, Next, SourceSpec};
use edgesight::config::CameraSettings;
use edgesight::daemon::camera::{self, Links};
use edgesight::daemon::camera_metrics::CameraFamilies;
use edgesight::frame::{FrameLayout, PixelFormat};
use edgesight::health::{self, HealthSettings};
use edgesight::metrics::Metrics;
use edgesight::pipeline::{FrameResult, Pipeline, PipelineOptions, Tuning, TuningChoice};

/// One test counts at a time.
static TURN: Mutex<()> = Mutex::new(());

struct Counting;

static ALLOCATIONS: AtomicUsize = AtomicUsize::new(0);

// SAFETY: every call is passed on unchanged to the system allocator, which upholds
// GlobalAlloc's contract; counting touches only an atomic.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        // SAFETY: the caller's layout, as GlobalAlloc::alloc requires it.
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: `ptr` came from `alloc` or `realloc` above, that is from System, with
        // this layout.
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
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

/// The daemon's per-frame path: the camera thread (test pattern, pipeline with two ROIs
/// and the health grid, snapshots polled) and the publisher (metrics, health detectors,
/// the latest-frame mailbox), counted over 100 frames once learning is over.
#[test]
fn a_warm_camera_and_its_publisher_allocate_nothing_per_frame() {
    let _turn = TURN.lock().unwrap_or_else(|e| e.into_inner());
    let device = std::env::var("EDGESIGHT_TEST_DEVICE")
        .unwrap_or_default()
        .parse()
        .expect("device spec");
    let settings = CameraSettings {
        name: "c".into(),
        device,
        tuning: TuningChoice::Auto,
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
    };
    let stop = Arc::new(AtomicBool::new(false));
    let (links, ends) = Links::new(Arc::clone(&stop), 8);
    let metrics = Metrics::new();
    let m = Arc::new(CameraFamilies::new(&metrics, 16).camera("c", Some(100.0)));
    let (latest_tx, latest) = tokio::sync::watch::channel(None);
    let camera = {
        let m = Arc::clone(&m);
        std::thread::spawn(move || camera::run(settings, m, links))
    };
    let publisher = std::thread::spawn(move || {
        edgesight::daemon::publish(ends.published, ends.spare, m, latest_tx)
    });
    let sequence = || latest.borrow().as_ref().map_or(0, |l| l.sequence);
    let wait_past = |n: u64| {
        let deadline = Instant::now() + Duration::from_secs(120);
        while sequence() < n {
            assert!(Instant::now() < deadline, "frame {n} never came");
            std::thread::sleep(Duration::from_millis(5));
        }
    };
    // Past learning (0.5 s) and the frame-rate window (2 s).
    wait_past(300);
    let learned = latest
        .borrow()
        .as_ref()
        .and_then(|l| l.health)
        .is_some_and(|h| !h.learning);
    assert!(learned, "health still learning at frame {}", sequence());
    let (from, before) = (sequence(), ALLOCATIONS.load(Ordering::Relaxed));
    wait_past(from + 100);
    let (to, during) = (sequence(), ALLOCATIONS.load(Ordering::Relaxed) - before);
    stop.store(true, Ordering::Relaxed);
    camera.join().expect("the camera thread ends");
    publisher.join().expect("the publisher ends");
    assert_eq!(during, 0, "{during} allocations from frame {from} to {to}");
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
