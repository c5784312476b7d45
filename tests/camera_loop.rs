//! The camera loop with a publisher that never takes anything: frames are dropped and
//! counted, and the loop keeps capturing and processing at the source's pace.

mod common;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc};
use std::time::Duration;

use edgesight::config::CameraSettings;
use edgesight::daemon::camera::{self, Beat, Links};
use edgesight::metrics::Metrics;
use edgesight::pipeline::PipelineOptions;

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
        source: "pattern:32x24@200".parse().expect("spec"),
        options: PipelineOptions::default(),
        regions: Vec::new(),
    };
    let metrics = Arc::new(Metrics::new(16));
    let stop = Arc::new(AtomicBool::new(false));
    let (publish_tx, publish_rx) = mpsc::sync_channel(2);
    let (_reloads_tx, reloads) = mpsc::channel();
    let (_snapshots_tx, snapshots) = mpsc::channel();
    let (started_tx, started_rx) = mpsc::sync_channel(1);
    let beat = Arc::new(Beat::new());
    let links = Links {
        stop: Arc::clone(&stop),
        beat: Arc::clone(&beat),
        publish: publish_tx,
        reloads,
        snapshots,
        started: started_tx,
    };
    let m = Arc::clone(&metrics);
    let thread = std::thread::spawn(move || camera::run(settings, m, links));
    let started = started_rx
        .recv()
        .expect("an answer")
        .expect("the camera starts");
    assert_eq!((started.layout.width, started.layout.height), (32, 24));
    std::thread::sleep(Duration::from_millis(800));
    // The loop turned recently: it is not blocked on the full queue.
    assert!(beat.since_last_turn() < Duration::from_millis(200));
    stop.store(true, Ordering::Relaxed);
    thread.join().expect("no panic").expect("a clean stop");

    let text = String::from_utf8(metrics.encode()).expect("UTF-8");
    let backlog = sample(
        &text,
        r#"edgesight_frames_dropped_total{camera="t",reason="publish_backlog"}"#,
    );
    let gaps = sample(
        &text,
        r#"edgesight_frames_dropped_total{camera="t",reason="sequence_gap"}"#,
    );
    // The queue holds the first two frames; every later one was processed and dropped.
    let mut queued = Vec::new();
    while let Ok(p) = publish_rx.try_recv() {
        queued.push(p.sequence);
    }
    assert_eq!(queued.len(), 2, "{queued:?}");
    assert!(queued[0] < queued[1]);
    // 0.8 s at 200 fps is 160 frames: most were processed (then dropped), few skipped.
    assert!(
        backlog >= 60.0,
        "only {backlog} frames dropped for the backlog"
    );
    assert!(
        gaps < backlog,
        "{gaps} skipped by the source vs {backlog} processed"
    );
    // Nothing was published, so nothing counts as published.
    assert_eq!(sample(&text, r#"edgesight_frames_total{camera="t"}"#), 0.0);
}
