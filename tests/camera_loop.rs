//! The camera loop with a publisher that never takes anything: frames are dropped and
//! counted, and the loop keeps capturing and processing at the source's pace.

mod common;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use edgesight::config::CameraSettings;
use edgesight::daemon::camera::{self, Links};
use edgesight::daemon::camera_metrics::CameraFamilies;
use edgesight::metrics::Metrics;
use edgesight::pipeline::{PipelineOptions, TuningChoice};

fn sample(metrics: &str, series: &str) -> f64 {
    metrics
        .lines()
        .find_map(|l| l.strip_prefix(series)?.trim().parse().ok())
        .unwrap_or_else(|| panic!("{series} missing:\n{metrics}"))
}

#[test]
fn a_publisher_that_never_reads_costs_frames_not_the_camera() {
    // Opens the device once here so the POCL cache directory is set up for the thread.
    let gpu = common::gpu();
    let device = std::env::var("EDGESIGHT_TEST_DEVICE")
        .unwrap_or_default()
        .parse()
        .expect("device spec");
    drop(gpu);
    let settings = CameraSettings {
        name: "t".into(),
        device,
        tuning: TuningChoice::Auto,
        verify_every: 0,
        profiling: edgesight::cl::Profiling::Auto,
        // 50 fps: a 32x24 frame takes well under its 20 ms even on a loaded machine, so
        // frames the source skips mean a loop that waited on the queue, not a slow CPU.
        source: "pattern:32x24@50".parse().expect("spec"),
        options: PipelineOptions::default(),
        regions: Vec::new(),
        health: edgesight::health::HealthSettings::default(),
        motion: edgesight::activity::ActivitySettings::default(),
    };
    let metrics = Arc::new(Metrics::new());
    let stop = Arc::new(AtomicBool::new(false));
    let (links, ends) = Links::new(Arc::clone(&stop), 2);
    let m = Arc::new(CameraFamilies::new(&metrics, 16).camera("t", None));
    let thread = std::thread::spawn(move || camera::run(settings, m, links));
    const BACKLOG: &str = r#"edgesight_frames_dropped_total{camera="t",reason="publish_backlog"}"#;
    const GAPS: &str = r#"edgesight_frames_dropped_total{camera="t",reason="sequence_gap"}"#;
    let counts = || {
        let text = String::from_utf8(metrics.encode()).expect("UTF-8");
        (sample(&text, BACKLOG), sample(&text, GAPS))
    };
    // The first launches may compile kernels (a cold POCL cache takes seconds): measure
    // once the loop is past them, that is once the queue is full and frames drop.
    let deadline = Instant::now() + Duration::from_secs(60);
    while counts().0 < 1.0 {
        assert!(
            Instant::now() < deadline,
            "no frame dropped for the backlog in 60 s"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    // Then at least 20 more frames processed and dropped, however long a loaded machine
    // takes to get there: the loop kept turning, not blocked on the full queue.
    let (backlog_before, gaps_before) = counts();
    let deadline = Instant::now() + Duration::from_secs(30);
    let (backlog_after, gaps_after) = loop {
        let (backlog, gaps) = counts();
        if backlog - backlog_before >= 20.0 {
            break (backlog, gaps);
        }
        assert!(
            Instant::now() < deadline,
            "only {} frames processed and dropped in 30 s",
            backlog - backlog_before
        );
        std::thread::sleep(Duration::from_millis(20));
    };
    let layout = ends.state.layout().expect("frames were processed");
    assert_eq!((layout.width, layout.height), (32, 24));
    stop.store(true, Ordering::Relaxed);
    thread.join().expect("no panic");

    // The queue holds the first two frames; every later one was processed and dropped.
    let mut queued = Vec::new();
    while let Ok(p) = ends.published.try_recv() {
        queued.push(p.sequence);
    }
    assert_eq!(queued.len(), 2, "{queued:?}");
    assert!(queued[0] < queued[1]);
    // Most frames were processed, then dropped, rather than skipped by the source.
    let processed = backlog_after - backlog_before;
    let skipped = gaps_after - gaps_before;
    assert!(
        skipped < processed,
        "{skipped} skipped by the source vs {processed} processed"
    );
    let text = String::from_utf8(metrics.encode()).expect("UTF-8");
    // Nothing was published, so nothing counts as published.
    assert_eq!(sample(&text, r#"edgesight_frames_total{camera="t"}"#), 0.0);
}
